"""The agent's main thread answers a signal delivered to another thread."""

import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import signal, threading, time
    from croniq_runner.timing import wait_for_stop

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    busy = threading.Thread(target=threading.Event().wait, daemon=True)
    busy.start()
    # The kernel may pick any thread for a process's signal; make it this one.
    threading.Timer(0.2, signal.pthread_kill, (busy.ident, signal.SIGTERM)).start()
    started = time.monotonic()
    wait_for_stop(stopping, interval=0.2)
    print(round(time.monotonic() - started, 2))
    """
)


def test_a_signal_taken_by_another_thread_still_stops_the_main_wait():
    # A plain event.wait() never returns here: run it where a hang is a timeout.
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=20
    )
    # It returned (a hang is the timeout above): the handler ran in the main
    # thread, and ended its wait.
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) > 0
