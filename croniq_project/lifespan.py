"""The web process's ASGI lifespan: how it learns that it is stopping.

uvicorn (0.55, requirements/) stops on SIGTERM or SIGINT in this order: it
stops accepting connections, closes the idle ones and asks the others to
close after their answer, waits for every request in flight to end (as long
as they take, unless `--timeout-graceful-shutdown` is set), and only then
sends the lifespan's `shutdown`. A long-poll waits up to 60 s for work: left
alone, every open poll held the stop until its wait ran out (16 s with one
idle runner, 27.5 s with 50), past the 10 s Docker gives before its SIGKILL,
which cuts whatever is still in flight. The lifespan's `shutdown` comes too
late to help.

So at the lifespan's `startup`, which uvicorn sends from its server on the
main thread once its own signal handlers are in place, a handler is chained
in front of them: the first SIGTERM or SIGINT marks the process as stopping
(`dispatch.hub.stop_waiting`: every waiting poll is answered at once with no
work, `stopping: true`, and so is every poll that still arrives), then calls
uvicorn's handler as before, which runs the stop above. uvicorn puts back
the handlers it found once it has stopped, so the chained one lives exactly
as long as the server: `croniq-admin serve` gets it too.

The other runner calls (finish, heartbeat, logs) take milliseconds and are
left to end as uvicorn lets them: each is one transaction, committed whole
or not at all, and a call whose answer never left (a connection closed
under it) is sent again by its runner; a repeated finish gets the same
answer (docs/design.md §4).
"""

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from core import tracing
from dispatch import hub

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# At the lifespan's shutdown (every request has ended), how long background
# steps still under way (a hand-back of work claimed for a poll whose runner
# hung up) get to commit before the process exits.
WIND_DOWN = 1.0


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI lifespan protocol, as uvicorn (`--lifespan auto`) speaks it."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            chain_stop_signals(hub.stop_waiting)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await hub.wind_down(WIND_DOWN)
            # The spans still queued leave now, within a bounded wait.
            await asyncio.to_thread(tracing.flush)
            await send({"type": "lifespan.shutdown.complete"})
            return


def chain_stop_signals(on_stop: Callable[[], None]) -> None:
    """Call `on_stop()` at the first SIGTERM or SIGINT, then the handler in
    place now (the server's), which still runs at every one of them (a
    second SIGINT still forces uvicorn's exit)."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread sets handlers: such a server catches no signal either
    stopped = False

    def first_stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            on_stop()

    for signum in STOP_SIGNALS:
        previous = signal.getsignal(signum)
        if callable(previous):  # else the signal ends the process at once anyway
            signal.signal(signum, chained(first_stop, previous))


def chained(
    first: Callable[[], None], previous: Callable[[int, FrameType | None], Any]
) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        first()
        previous(signum, frame)

    return handler
