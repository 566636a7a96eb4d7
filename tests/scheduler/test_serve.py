"""scheduler.firing.serve: a scheduler loop that dies takes the web server with it.

A real uvicorn and a real SchedulerLoop in this process; the loop's clock is
the seam through which it dies (as a library calling sys.exit() in the
loop's thread would kill it), once the web server has answered.
"""

import threading
import time

import pytest
import requests

from harness.processes import free_port, wait_for
from scheduler.firing import serve
from scheduler.firing.loop import SchedulerLoop
from scheduler.firing.serve import OneProcess, web_server


class LoopKilled(BaseException):
    """Escapes the loop's own error handling, which catches Exception."""


def clock_that_dies_once_the_web_answers(server, url, answers):
    def clock():
        wait_for(lambda: server.started, message="the web server")
        answers.append(requests.get(url + "/healthz", timeout=10).status_code)
        raise LoopKilled

    return clock


@pytest.mark.django_db(transaction=True)
def test_a_loop_that_dies_stops_the_web_server_and_the_exit_code_is_1():
    port = free_port()
    server = web_server("127.0.0.1", port)
    answers = []
    clock = clock_that_dies_once_the_web_answers(server, f"http://127.0.0.1:{port}", answers)
    process = OneProcess(server, SchedulerLoop(interval=0.1, clock=clock))
    # Without the loop's death stopping it, only this would.
    safety_stops = []
    safety_stop = threading.Timer(60, lambda: safety_stops.append(1) or process.stop())
    safety_stop.start()
    try:
        assert process.run() == 1
    finally:
        safety_stop.cancel()

    assert safety_stops == []  # the loop's death stopped it
    assert answers == [200]  # it served while the loop lived
    assert not process.thread.is_alive()
    assert process.loop_died
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


@pytest.mark.django_db(transaction=True)
def test_a_stop_before_the_web_server_serves_ends_both_with_exit_code_0():
    server = web_server("127.0.0.1", free_port())
    process = OneProcess(server, SchedulerLoop(interval=0.1))
    process.stop()

    assert process.run() == 0
    assert not process.thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_the_web_server_looks_once_a_second_at_rest_and_a_stop_from_another_thread_wakes_it(
    monkeypatch,
):
    server = web_server("127.0.0.1", free_port())
    looks = []
    on_tick = server.on_tick

    async def counted(counter):
        looks.append(time.monotonic())
        return await on_tick(counter)

    server.on_tick = counted
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, message="the web server")
        time.sleep(2.5)
        at_rest = len(looks)
        # Its sleep between looks made long: only the stop can end the next.
        monkeypatch.setattr(serve, "WEB_TICK", 60.0)
        before = len(looks)
        # Just after a look: it sleeps WEB_TICK now.
        wait_for(lambda: len(looks) > before, message="a look")
    finally:
        server.should_exit = True
        thread.join(serve.WEB_TICK / 2)

    assert at_rest <= 5  # uvicorn's own loop: about 25 in 2.5 s
    assert not thread.is_alive()  # not at the end of its sleep


def test_the_access_log_is_off_unless_asked():
    """Runners' long-polls are most requests: logged, they scroll the start's
    "where to log in" lines away in seconds."""
    from scheduler.management.commands.serve import Command

    parser = Command().create_parser("croniq-admin", "serve")
    assert parser.parse_args([]).access_log is False
    assert parser.parse_args(["--access-log"]).access_log is True
    assert web_server("127.0.0.1", free_port()).config.access_log is False
    assert web_server("127.0.0.1", free_port(), access_log=True).config.access_log is True
