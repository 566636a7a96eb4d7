"""`manage.py serve`: the web server and the scheduler loop start and stop
together as one real process."""

import contextlib
import signal
import socket
import threading
import time
from contextlib import closing

import pytest
import yaml

from harness.processes import OneProcess, free_port, manage, query, wait_for
from tests.e2e.protocol_client import RunnerClient, token

pytestmark = pytest.mark.e2e

POLL_WAIT = 60  # the most a poll may ask to wait


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_web_and_loop_and_exits_zero(signum, e2e_database, tmp_path):
    (tmp_path / "jobs.yaml").write_text(
        yaml.safe_dump(
            {"jobs": [{"name": "each-second", "schedule": "@every 1s", "command": "true"}]}
        )
    )
    manage(e2e_database, "apply", str(tmp_path / "jobs.yaml"))
    serve = OneProcess(e2e_database, tmp_path / "serve.log").wait_ready()
    # The loop schedules while the web server answers.
    wait_for(
        lambda: query(e2e_database, "SELECT COUNT(*) FROM scheduler_execution")[0][0] >= 2,
        message="executions fired by the loop in serve",
    )
    # A runner's long-poll is waiting: it may not hold the stop for its 60 s.
    runner = RunnerClient(serve.url, token(e2e_database), labels=["nothing-matches"])
    assert runner.register().status_code == 200
    poll = threading.Thread(target=lambda: poll_until_cut(runner), daemon=True)
    poll.start()
    time.sleep(0.5)

    serve.popen.send_signal(signum)
    started = time.monotonic()
    code = serve.popen.wait(POLL_WAIT / 2)  # the poll did not hold it (how soon: bench/web_stop.py)
    print(f"stopped {time.monotonic() - started:.2f}s after the signal")

    output = serve.output()
    assert code == 0, output
    assert "scheduler loop stopped" in output
    assert "Finished server process" in output
    serve.stop()


def poll_until_cut(runner):
    # The server goes away under the poll: any answer or error will do.
    with contextlib.suppress(Exception):
        runner.claim(wait=POLL_WAIT)


def test_a_web_server_that_cannot_start_stops_the_loop_and_exits_non_zero(e2e_database, tmp_path):
    with closing(socket.socket()) as taken:
        port = free_port()
        taken.bind(("127.0.0.1", port))
        taken.listen()
        serve = OneProcess(e2e_database, tmp_path / "serve.log", port=port)
        code = serve.popen.wait(20)

    output = serve.output()
    assert code != 0, output
    assert "scheduler loop stopped" in output
    serve.stop()
