"""How a pruner paces itself (`scheduler.housekeeping.retention`): batches sized by the
time their transaction takes (`Pacer`), and kept out of the scheduler loop's
ticks (`TickWatch`)."""

from datetime import datetime, timedelta

from audit.recording import SCHEDULER_TICK, last_beat
from core import db

# Batches are sized by time, not rows: each one's transaction aims to take
# about this long, from the time per row the last one took. On SQLite a
# batch holds the whole database's write lock, and every other writer (a
# tick, a runner's call) waits for it, a few ms more on SQLite's
# busy-handler steps; on PostgreSQL a batch locks only its own rows,
# but its commit and its WAL are flushed ahead of the next tick's commit.
SQLITE_BATCH_SECONDS = 0.01
POSTGRES_BATCH_SECONDS = 0.02
SMALLEST_BATCH = 10
LARGEST_BATCH = 2000
FIRST_BATCH = 50
# `manage.py prune` keeps its batches out of the loop's ticks: a batch that
# could still run when the next tick is expected waits until that tick has
# written its heartbeat (at most TICK_WAIT seconds after the expected
# start: a late tick is not waited for any longer). The loop ticks at the
# earliest due instant and at least every LOOP_INTERVAL seconds (the
# default `scheduler_loop --interval`).
TICK_GUARD = 0.01
TICK_WAIT = 0.1
TICK_POLL = 0.005
LOOP_INTERVAL = 1.0


class Pacer:
    """Sizes batches so that each transaction takes about `seconds`, from the
    time per row the previous one took (growing at most twofold a batch), between
    `smallest` and `largest` rows. With a budget, a batch is cut to what is
    left of it. Kept between calls: the loop's pacer carries what it learnt
    from one housekeeping pass to the next."""

    def __init__(
        self, seconds, smallest=SMALLEST_BATCH, largest=LARGEST_BATCH, first=FIRST_BATCH
    ) -> None:
        self.seconds = seconds
        self.smallest, self.largest = smallest, largest
        self.size = max(smallest, min(largest, first))
        self.per_row = None  # seconds, measured

    @classmethod
    def fixed(cls, size: int) -> "Pacer":
        return cls(seconds=0, smallest=size, largest=size, first=size)

    def record(self, rows: int, took: float) -> None:
        """A batch of `rows` candidates took `took` seconds."""
        if rows <= 0:
            return
        self.per_row = took / rows
        if self.smallest == self.largest:
            return
        wanted = self.seconds / self.per_row if self.per_row else self.largest
        self.size = round(max(self.smallest, min(self.largest, 2 * self.size, wanted)))

    def next_size(self, left: float | None = None) -> int:
        """Rows for the next batch, or 0 when not even the smallest batch fits
        in `left` seconds (None: no budget)."""
        if left is None or self.per_row is None:
            return self.size
        fits = int(left / self.per_row + 1e-9) if self.per_row else self.size
        if fits < self.smallest:
            return 0
        return min(self.size, fits)


class TickWatch:
    """Keeps a pruner's batches out of the scheduler loop's ticks.

    The loop wakes at the earliest due instant (`ticks.earliest_due`), or an
    interval after its last tick, and writes its heartbeat (the tick's start)
    as each tick ends. Before a batch that could still be running when the
    next tick is expected, the pruner waits for a newer heartbeat: that tick
    has ended, and the database is the pruner's again for most of a second.
    A loop that has not beaten for a while is not waited for.
    """

    def __init__(self, wall, clock, sleep, read_beat=None, read_due=None) -> None:
        self.wall, self.clock, self.sleep = wall, clock, sleep
        self.read_beat = read_beat or loop_heartbeat
        self.read_due = read_due or next_wake
        self.waited = 0  # batches held back for a tick

    def before_batch(self, estimate: float) -> None:
        """Wait, if a batch taking `estimate` seconds could meet a tick."""
        now = self.wall()
        beat = self.read_beat()
        if beat is None or (now - beat).total_seconds() > 2 * LOOP_INTERVAL + TICK_WAIT:
            return  # no loop is running
        expected = beat + timedelta(seconds=LOOP_INTERVAL)
        due = self.read_due(now)
        if due is not None and due > beat:
            expected = min(expected, due)
        ahead = (expected - now).total_seconds()
        if ahead > estimate + TICK_GUARD or ahead < 0:
            return  # ends before the tick; or the tick is late, when is unknown
        self.waited += 1
        deadline = self.clock() + ahead + TICK_WAIT
        while self.clock() < deadline:
            self.sleep(TICK_POLL)
            if self.read_beat() != beat:
                return


def loop_heartbeat() -> datetime | None:
    return last_beat(SCHEDULER_TICK)


def next_wake(now: datetime) -> datetime | None:
    from scheduler.firing import ticks

    return ticks.earliest_due(now, ticks.FIRE_LEAD)


def default_pacer() -> Pacer:
    # By design: a batch on SQLite holds the one write lock the tick needs.
    seconds = SQLITE_BATCH_SECONDS if db.on_sqlite() else POSTGRES_BATCH_SECONDS
    return Pacer(seconds)


_loop_pacer = None


def loop_pacer() -> Pacer:
    """The loop's pacer, kept for the life of the process."""
    global _loop_pacer
    if _loop_pacer is None:
        _loop_pacer = default_pacer()
    return _loop_pacer
