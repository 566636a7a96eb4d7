"""Pings recorded together: one transaction for the pings that wait while
the previous one commits (group commit, docs/design.md §12).

A web process records pings on its database threads (SQLite: one). Each in
a transaction of its own, a thousand pings a second were a thousand
BEGIN/COMMIT pairs: on SQLite a thousand takings of the one write lock the
scheduler loop's ticks queue behind (in sleeps of SQLite's busy handler,
1 ms and up), on PostgreSQL a thousand WAL flushes. Here a ping that comes
while a writer is free starts one at once, and the pings that come while
the writers write go together in the next transaction (`pings.record_all`):
no ping waits for a batch to fill, and under load the transactions grow
instead of queueing.
A batch that fails fails each of its pings (answered 503: senders retry).
"""

import asyncio
import weakref

from checks import pings
from core import db
from core.db_threads import run_db

# The most pings one transaction records: a transaction holds SQLite's
# write lock, and others wait (the loop's tick), for about 0.15 ms a ping:
# at most some 3 ms. Twenty pings share a BEGIN and a COMMIT already.
MOST = 20
# Writers at once, each a transaction on a database thread of its own.
# SQLite takes one writer at a time anyway. On PostgreSQL a writer waits
# on a round trip per statement: one writer took 420 pings a second where
# a transaction a ping on the 8 database threads took 1,000.
WRITERS = {"sqlite": 1}
MOST_WRITERS = 4


class Batches:
    """The pings of one event loop waiting to be recorded, and its writer."""

    def __init__(self, writers: int) -> None:
        self.waiting: list[tuple[pings.Received, asyncio.Future[str]]] = []
        self.most_writers = writers
        # Counted by the writers themselves: one that finds nothing waiting
        # is off the count before any other coroutine runs, so a ping never
        # waits for a writer that has ended.
        self.writing = 0
        self.tasks: set[asyncio.Task[None]] = set()  # referenced while they run

    async def record(self, ping: pings.Received) -> str:
        """`pings.record`, in the next transaction of one of this loop's writers."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.waiting.append((ping, future))
        if self.writing < self.most_writers:
            self.writing += 1
            writer = loop.create_task(self.write())
            self.tasks.add(writer)
            writer.add_done_callback(self.tasks.discard)
        return await future

    async def write(self) -> None:
        try:
            await self.write_waiting()
        finally:
            self.writing -= 1

    async def write_waiting(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting[:MOST], self.waiting[MOST:]
            try:
                answers = await run_db(pings.record_all, [ping for ping, _ in batch])
            except Exception as error:  # noqa: BLE001 - each ping's sender gets it
                for _, future in batch:
                    if not future.done():  # its sender hung up: the future is cancelled
                        future.set_exception(error)
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)


_batches: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Batches]" = (
    weakref.WeakKeyDictionary()
)


async def record(ping: pings.Received) -> str:
    """Record `ping` with the others that wait on this event loop."""
    loop = asyncio.get_running_loop()
    batches = _batches.get(loop)
    if batches is None:
        batches = _batches[loop] = Batches(WRITERS.get(db.vendor(), MOST_WRITERS))
    return await batches.record(ping)
