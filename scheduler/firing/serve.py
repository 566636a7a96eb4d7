"""One process for small installs: the web server and the scheduler loop.

uvicorn serves in the main thread (only the main thread receives signals);
the loop runs in a thread beside it, with database connections of its own
(Django's are per thread), so on SQLite the two meet in the WAL file with
IMMEDIATE transactions and a busy timeout, exactly as two processes would.

Each part outlives the other's errors: the loop logs and isolates a failing
step as it does in `scheduler_loop`, and a failing request is the web
server's to answer. But neither runs alone: SIGTERM or SIGINT stops both
(exit 0; the web server first, its open long-polls answered at once, then
the loop once its current step has ended); a loop that ends without being
asked stops the web server (exit 1), and a web server that cannot start or
dies stops the loop (exit 1), so a supervisor restarts the process instead
of keeping a server that schedules nothing.

The ASGI application is named by string: `scheduler` imports nothing above
it.
"""

import asyncio
import contextlib
import logging
import signal
import threading
from types import FrameType

import uvicorn
from django.db import connections

log = logging.getLogger("croniq.serve")

ASGI_APPLICATION = "croniq_project.asgi:application"
# After a stop, requests in flight get this long to finish before they are
# cancelled, so that no slow request holds the stop. Long-polls do not wait
# for it: the application answers them as the stop begins
# (croniq_project.lifespan), and the process exits well within 2 s.
SHUTDOWN_GRACE = 3.0
# A stopped loop ends its current step first; one that takes longer than
# this is reported and the process exits 1 without it.
LOOP_STOP_TIMEOUT = 15.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long the web server's main loop sleeps between its looks: the Date
# header's resolution. A stop wakes it at once.
WEB_TICK = 1.0


def web_server(host: str, port: int, access_log: bool = False) -> "RestingServer":
    config = uvicorn.Config(
        ASGI_APPLICATION,
        host=host,
        port=port,
        # Off unless asked: every runner's long-poll is a line, and the lines
        # that matter at start (where to log in) scrolled away in seconds.
        access_log=access_log,
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
        # Django's LOGGING formats uvicorn's lines too: one process, one format.
        log_config=None,
    )
    return RestingServer(config)


class RestingServer(uvicorn.Server):
    """uvicorn, waking once a second instead of ten times.

    uvicorn's main loop sleeps 100 ms between looks at `should_exit`,
    renewing the Date header every tenth: 0.15% of a core at rest, a sixth
    of an idle install's budget (bench/idle_cost.py). This one sleeps a
    second between looks (`on_tick` still renews the header each second) and
    wakes at once when `should_exit` is set, from a signal handler or
    another thread (the loop's, when it dies).
    """

    def __init__(self, config) -> None:
        self.event_loop = None
        self.stop_requested = None
        self._should_exit = False
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self.event_loop is not None:
            # RuntimeError: the event loop has closed, nothing is left to wake.
            with contextlib.suppress(RuntimeError):
                self.event_loop.call_soon_threadsafe(self.stop_requested.set)

    async def main_loop(self) -> None:
        self.stop_requested = asyncio.Event()
        self.event_loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000  # `on_tick` counts 100 ms ticks
            # A stop sets the event (`should_exit`): the wait ends at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_requested.wait(), WEB_TICK)
            should_exit = await self.on_tick(counter)


class OneProcess:
    """A uvicorn server and a scheduler loop that start and stop together."""

    def __init__(self, server, loop) -> None:
        self.server = server
        self.loop = loop
        self.stopping = threading.Event()
        self.loop_died = False
        self.thread = threading.Thread(target=self.run_loop, name="scheduler-loop", daemon=True)

    def run(self) -> int:
        """Serve until a signal or until either part ends; the exit code."""
        previous = {signum: signal.signal(signum, self.on_signal) for signum in STOP_SIGNALS}
        try:
            # Load the application first: a configuration error exits here
            # with its one-line message, before the loop starts.
            self.server.config.load()
            self.thread.start()
            try:
                self.server.run()
            finally:
                self.stop()
                self.thread.join(LOOP_STOP_TIMEOUT)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.exit_code()

    def exit_code(self) -> int:
        if self.loop_died:
            return 1
        if self.thread.is_alive():
            log.error("the scheduler loop did not stop within %.0fs", LOOP_STOP_TIMEOUT)
            return 1
        if not self.server.started:
            log.error("the web server did not start")
            return 1
        return 0

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        # uvicorn captures the signals while it serves and passes them on
        # here once it has shut down; one arriving before it serves stops
        # it before it starts.
        log.info("%s: stopping the web server and the scheduler loop", signal.strsignal(signum))
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.loop.stop()
        self.server.should_exit = True

    def run_loop(self) -> None:
        try:
            self.loop.run_forever()
        except BaseException:
            log.exception("the scheduler loop died")
        finally:
            connections.close_all()  # this thread's connections only
        if not self.stopping.is_set():
            log.error("the scheduler loop ended on its own: stopping the web server")
            self.loop_died = True
            self.server.should_exit = True
