import asyncio
import datetime as dt
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import Counter
from core.db_threads import steps_in_caller_thread
from croniq_project.collector import unmatched_pending
from dispatch import hints, identity, refusals
from dispatch import hub as hub_module
from dispatch.hub import CLAIM_AHEAD, Hub, Waiter, serve, touch_runners
from runners.models import Runner
from scheduler.firing import ticks
from scheduler.models import Execution
from tests.factories import RunnerFactory
from tests.runners.conftest import NOW, pending


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def runners(token):
    """Three registered runners: linux, windows, and gpu+linux (capacity 2)."""
    made = {}
    for name, labels, capacity in [
        ("linux", ["linux"], 1),
        ("windows", ["windows"], 1),
        ("gpu", ["gpu", "linux"], 2),
    ]:
        made[name] = RunnerFactory(
            token=token, name=name, labels=labels, session=f"s-{name}", capacity=capacity
        )
    return made


def waiter(loop, runner, capacity=None, session=None, slots=None):
    return Waiter(loop, runner.pk, runner.token, session or runner.session, capacity, slots)


def held_by(runner):
    return set(
        Execution.objects.filter(runner=runner, state=Execution.RUNNING).values_list(
            "pk", flat=True
        )
    )


def test_ready_work_goes_to_a_waiting_poll_it_fits(db, loop, runners):
    gpu_job = pending(now=NOW - dt.timedelta(seconds=2), labels=["gpu"])
    linux_job = pending(now=NOW - dt.timedelta(seconds=1), labels=["linux"])
    windows, linux, gpu = (waiter(loop, runners[n]) for n in ("windows", "linux", "gpu"))
    served, upcoming = serve([windows, linux, gpu], NOW)
    got = {w: [a["id"] for a in handed.assignments] for w, handed in served}
    assert got == {linux: [linux_job.pk], gpu: [gpu_job.pk]}
    assert held_by(runners["linux"]) == {linux_job.pk}
    assert held_by(runners["gpu"]) == {gpu_job.pk}
    sessions = dict(Execution.objects.values_list("pk", "session"))
    assert sessions == {linux_job.pk: "s-linux", gpu_job.pk: "s-gpu"}
    assert upcoming == []


def test_work_is_dealt_round_the_polls_oldest_first_each_up_to_its_capacity(db, loop, runners):
    oldest, middle, newest = (
        pending(now=NOW - dt.timedelta(seconds=s), labels=["linux"]) for s in (3, 2, 1)
    )
    gpu, linux = waiter(loop, runners["gpu"]), waiter(loop, runners["linux"])
    served, _ = serve([gpu, linux], NOW)
    got = {w: [a["id"] for a in handed.assignments] for w, handed in served}
    assert got == {gpu: [oldest.pk, newest.pk], linux: [middle.pk]}


def test_an_instants_work_is_spread_over_the_waiting_runners(db, loop, token):
    """Ten executions, five polls with room for ten each: two apiece, not
    ten to the first, so every runner served polls again with free slots."""
    for _ in range(10):
        pending(now=NOW, labels=["linux"])
    runners = [
        RunnerFactory(token=token, name=f"r{n}", labels=["linux"], session=f"s{n}", capacity=10)
        for n in range(5)
    ]
    polls = [waiter(loop, runner) for runner in runners]
    served, _ = serve(polls, NOW)
    assert sorted(len(handed.assignments) for _, handed in served) == [2, 2, 2, 2, 2]


def test_old_work_only_the_union_of_labels_fits_never_holds_back_work_a_runner_fits(
    db, loop, token
):
    """Runner A carries {a}, runner B {b}, both waiting with room for one.
    Older executions needing {a, b} fit no single runner (as many as the
    polls have room for); a newer one needing {a} goes to A in the same
    step, not a poll's wait later."""
    a = RunnerFactory(token=token, name="a", labels=["a"], session="s-a", capacity=1)
    b = RunnerFactory(token=token, name="b", labels=["b"], session="s-b", capacity=1)
    stuck = [pending(now=NOW - dt.timedelta(seconds=s), labels=["a", "b"]) for s in (9, 8)]
    fits_a = pending(now=NOW - dt.timedelta(seconds=1), labels=["a"])
    poll_a, poll_b = waiter(loop, a), waiter(loop, b)

    served, _ = serve([poll_a, poll_b], NOW)

    got = {w: [x["id"] for x in handed.assignments] for w, handed in served}
    assert got == {poll_a: [fits_a.pk]}
    assert held_by(a) == {fits_a.pk}
    states = set(
        Execution.objects.filter(pk__in=[e.pk for e in stuck]).values_list("state", flat=True)
    )
    assert states == {Execution.PENDING}
    # What no runner can take is on /metrics as work with no runner for its labels.
    online = [set(a.labels), set(b.labels)]
    assert unmatched_pending(Execution.objects.filter(state=Execution.PENDING), online) == {
        "a,b": 2
    }


def test_each_set_of_runner_labels_gets_its_own_oldest_work(db, loop, token):
    """Work only one runner fits never takes the room another runner has."""
    a = RunnerFactory(token=token, name="a", labels=["a"], session="s-a", capacity=1)
    b = RunnerFactory(token=token, name="b", labels=["b"], session="s-b", capacity=1)
    b_work = [pending(now=NOW - dt.timedelta(seconds=s), labels=["b"]) for s in (9, 8, 7)]
    a_work = pending(now=NOW - dt.timedelta(seconds=1), labels=["a"])
    poll_a, poll_b = waiter(loop, a), waiter(loop, b)

    served, _ = serve([poll_b, poll_a], NOW)

    got = {w: [x["id"] for x in handed.assignments] for w, handed in served}
    assert got == {poll_b: [b_work[0].pk], poll_a: [a_work.pk]}


def test_work_only_a_rarer_label_fits_is_dealt_before_work_anyone_fits(db, loop, token):
    """Runner `eu` carries {linux, eu}, runner `plain` {linux}, one slot
    each, and `eu` has waited longest. The older execution fits both, the
    newer one only `eu`: dealt oldest first, the older took eu's slot and
    the newer waited for an eu run to end."""
    eu = RunnerFactory(token=token, name="eu", labels=["linux", "eu"], session="s-eu", capacity=1)
    plain = RunnerFactory(token=token, name="plain", labels=["linux"], session="s-p", capacity=1)
    anyone = pending(now=NOW - dt.timedelta(seconds=2), labels=["linux"])
    only_eu = pending(now=NOW - dt.timedelta(seconds=1), labels=["eu"])
    poll_eu, poll_plain = waiter(loop, eu), waiter(loop, plain)

    served, _ = serve([poll_eu, poll_plain], NOW)

    got = {w: [x["id"] for x in handed.assignments] for w, handed in served}
    assert got == {poll_eu: [only_eu.pk], poll_plain: [anyone.pk]}


def test_work_one_runner_gets_in_a_step_is_listed_oldest_first(db, loop, token):
    """The rarer work is dealt first, but each answer lists its work oldest
    first, as the runner runs it."""
    many = RunnerFactory(token=token, name="many", labels=["a", "b"], session="s-m", capacity=3)
    other = RunnerFactory(token=token, name="other", labels=["c"], session="s-o", capacity=1)
    older = [pending(now=NOW - dt.timedelta(seconds=s), labels=[]) for s in (3, 2)]
    only_many = pending(now=NOW - dt.timedelta(seconds=1), labels=["a", "b"])
    poll_many, poll_other = waiter(loop, many), waiter(loop, other)

    served, _ = serve([poll_many, poll_other], NOW)

    got = {w: [x["id"] for x in handed.assignments] for w, handed in served}
    assert got == {poll_many: [older[1].pk, only_many.pk], poll_other: [older[0].pk]}


def running_on(runner, count):
    """Make `count` runs the server counts as open on `runner`."""
    for _ in range(count):
        execution = pending(now=NOW - dt.timedelta(minutes=1))
        Execution.objects.filter(pk=execution.pk).update(
            state=Execution.RUNNING, runner=runner, session=runner.session
        )


def ids_served(served):
    return {w: [a["id"] for a in handed.assignments] for w, handed in served}


@pytest.mark.parametrize(
    ("still_open", "gets"),
    [
        (0, 3),  # both runs it had when it polled ended while it waited
        (1, 2),  # one ended
        (2, 1),  # none ended, or their finishes are on their way: its capacity
    ],
)
def test_a_poll_that_says_its_slots_takes_the_slots_its_runs_freed_while_it_waited(
    db, loop, runners, still_open, gets
):
    # The poll left with 2 runs going on a 3-slot runner: capacity 1.
    gpu = runners["gpu"]
    running_on(gpu, still_open)
    work = [pending(now=NOW - dt.timedelta(seconds=s), labels=["gpu"]) for s in (4, 3, 2, 1)]
    poll = waiter(loop, gpu, capacity=1, slots=3)
    served, _ = serve([poll], NOW)
    assert ids_served(served) == {poll: [e.pk for e in work[:gets]]}


def test_a_poll_without_slots_takes_its_capacity_whatever_ended(db, loop, runners):
    work = [pending(now=NOW - dt.timedelta(seconds=s), labels=["gpu"]) for s in (3, 2, 1)]
    poll = waiter(loop, runners["gpu"], capacity=1)
    served, _ = serve([poll], NOW)
    assert ids_served(served) == {poll: [work[0].pk]}


def test_a_poll_never_takes_less_than_its_capacity_for_runs_still_open(db, loop, runners):
    # A finish the runner sent before it polled, not yet committed.
    gpu = runners["gpu"]
    running_on(gpu, 3)
    work = [pending(now=NOW - dt.timedelta(seconds=s), labels=["gpu"]) for s in (3, 2, 1)]
    poll = waiter(loop, gpu, capacity=2, slots=3)
    served, _ = serve([poll], NOW)
    assert ids_served(served) == {poll: [work[0].pk, work[1].pk]}


def test_the_open_runs_of_refilling_polls_are_one_query_for_them_all(db, loop, runners):
    names = ("linux", "gpu", "windows")

    def queries(polls):
        pending(labels=["linux"])
        with CaptureQueriesContext(connection) as captured:
            [(_, handed)] = serve(polls, NOW)[0]
        assert len(handed.assignments) == 1
        return len(captured)

    plain = queries([waiter(loop, runners[n], capacity=1) for n in names])
    refilling = queries([waiter(loop, runners[n], capacity=1, slots=3) for n in names])
    assert refilling == plain + 1


def test_a_step_serving_several_runners_writes_each_claim_as_its_answer_says(
    db, loop, runners, settings
):
    settings.CRONIQ_LEASE_TTL = 30
    ready = pending(now=NOW - dt.timedelta(seconds=5), labels=["linux"])
    ahead = pending(now=NOW + dt.timedelta(milliseconds=100), labels=["gpu"])
    windows = pending(now=NOW - dt.timedelta(seconds=1), labels=["windows"])
    polls = {name: waiter(loop, runners[name]) for name in ("linux", "gpu", "windows")}
    served, _ = serve(list(polls.values()), NOW, until=NOW + dt.timedelta(seconds=CLAIM_AHEAD))
    answers = {w: handed.assignments for w, handed in served}
    for name, execution in (("linux", ready), ("gpu", ahead), ("windows", windows)):
        [assigned] = answers[polls[name]]
        execution.refresh_from_db()
        assert assigned["id"] == execution.pk
        assert (execution.state, execution.runner, execution.session) == (
            Execution.RUNNING,
            runners[name],
            runners[name].session,
        )
        assert execution.lease == assigned["lease"] == 1
        assert execution.lease_expires_at == assigned["lease_expires_at"]
        assert execution.lease_expires_at == NOW + dt.timedelta(seconds=30)
        # Claimed ahead of its instant: it reaches the runner at the instant.
        assert execution.claimed_at == max(NOW, execution.run_after)
    assert ahead.claimed_at == ahead.run_after > NOW


@pytest.mark.parametrize("labels", [["linux"], ["gpu"]])
def test_a_steps_queries_do_not_grow_with_the_work_it_hands_out(db, loop, token, labels):
    # A claim reads only some of a job's columns: reading another (one
    # query per execution) would show here.
    made = [
        RunnerFactory(token=token, name=f"r{n}", labels=["linux", "gpu"], session=f"s{n}")
        for n in range(4)
    ]

    def queries(work):
        for _ in range(work):
            pending(now=NOW - dt.timedelta(seconds=1), labels=labels)
        polls = [waiter(loop, runner, capacity=3) for runner in made]
        with CaptureQueriesContext(connection) as captured:
            served, _ = serve(polls, NOW)
        assert sum(len(handed.assignments) for _, handed in served) == work
        return len(captured)

    assert queries(2) == queries(12)


def test_work_that_fits_nobody_waiting_is_left_pending(db, loop, runners):
    windows_job = pending(now=NOW, labels=["windows"])
    served, _ = serve([waiter(loop, runners["linux"])], NOW)
    assert served == []
    windows_job.refresh_from_db()
    assert windows_job.state == Execution.PENDING


def test_a_superseded_poll_gets_its_refusal_and_no_work(db, loop, runners):
    pending(now=NOW, labels=["linux"])
    stale = waiter(loop, runners["linux"], session="s-old")
    fresh = waiter(loop, runners["gpu"])
    served, _ = serve([stale, fresh], NOW)
    assert isinstance(dict(served)[stale], refusals.Conflict)
    assert len(dict(served)[fresh].assignments) == 1


def test_a_draining_runners_poll_gets_nothing(db, loop, runners):
    pending(now=NOW, labels=["linux"])
    Runner.objects.filter(pk=runners["linux"].pk).update(state=Runner.DRAINING)
    served, _ = serve([waiter(loop, runners["linux"])], NOW)
    assert served == []


def test_a_drained_runner_marked_offline_while_its_poll_waits_gets_nothing(db, loop, runners):
    pending(now=NOW, labels=["linux"])
    identity.drain(runners["linux"], NOW)
    Runner.objects.filter(pk=runners["linux"].pk).update(state=Runner.OFFLINE)
    served, _ = serve([waiter(loop, runners["linux"])], NOW)
    assert served == []


def test_waiting_polls_bring_their_runners_back_still_drained(db, runners):
    linux, gpu = runners["linux"], runners["gpu"]
    identity.drain(linux, NOW)
    Runner.objects.filter(pk__in=[linux.pk, gpu.pk]).update(state=Runner.OFFLINE)
    touch_runners([linux.pk, gpu.pk], NOW)
    states = dict(Runner.objects.values_list("name", "state"))
    assert (states["linux"], states["gpu"]) == (Runner.DRAINING, Runner.ONLINE)


def test_serving_reports_when_the_next_pending_execution_becomes_ready(db, loop, runners):
    pending(now=NOW + dt.timedelta(seconds=9), labels=["linux"])
    pending(now=NOW + dt.timedelta(seconds=4), labels=["linux"])
    served, upcoming = serve([waiter(loop, runners["linux"])], NOW)
    assert served == []
    assert upcoming == [(NOW + dt.timedelta(seconds=4), None)]


def test_work_ready_within_the_claim_ahead_is_claimed_and_answered_at_its_instant(
    db, loop, runners
):
    soon = pending(now=NOW + dt.timedelta(seconds=0.05), labels=["linux"])
    later = pending(now=NOW + dt.timedelta(seconds=5), labels=["linux"])
    served, upcoming = serve([waiter(loop, runners["gpu"])], NOW, NOW + dt.timedelta(seconds=0.1))
    [(_, handed)] = served
    assert [a["id"] for a in handed.assignments] == [soon.pk]
    assert handed.not_before == NOW + dt.timedelta(seconds=0.05)
    assert held_by(runners["gpu"]) == {soon.pk}
    soon.refresh_from_db()
    assert soon.claimed_at == soon.run_after  # it starts at its instant
    assert upcoming == [(later.run_after, None)]


def test_work_already_ready_is_answered_at_once(db, loop, runners):
    pending(now=NOW - dt.timedelta(seconds=1), labels=["linux"])
    served, _ = serve([waiter(loop, runners["gpu"])], NOW, NOW + dt.timedelta(seconds=0.1))
    [(_, handed)] = served
    assert handed.not_before is None


def test_the_hub_rescans_claim_ahead_of_the_next_pending_executions_instant(loop, monkeypatch):
    hub = Hub(loop)
    delays = []
    call_later = loop.call_later
    monkeypatch.setattr(
        loop, "call_later", lambda delay, *a: delays.append(delay) or call_later(delay, *a)
    )
    hub.wake_at([(NOW + dt.timedelta(seconds=CLAIM_AHEAD + 0.2), None)], NOW)
    assert delays == [pytest.approx(0.2)]  # CLAIM_AHEAD before the instant
    assert not hub.scan_requested.is_set()
    loop.run_until_complete(asyncio.wait_for(hub.scan_requested.wait(), timeout=10))


def test_a_poll_waiting_after_a_scan_found_none_asks_for_a_scan(loop):
    # The loop's NOTIFY came while no poll waited here: the scan looked at
    # nothing, so no timer claims the new work ahead of its instant.
    hub = Hub(loop)
    hub.start = lambda: None  # no background tasks: this test drives the scans
    loop.run_until_complete(hub.scan())
    assert not hub.scan_requested.is_set()
    hub.add(1, "token", "s1", 1)
    assert hub.scan_requested.is_set()


def test_a_poll_joining_a_hub_that_knows_its_next_scan_adds_none(loop, monkeypatch):
    async def nothing_ready(serve, waiters, now, until):
        return [], []  # the step's answer: nothing served, nothing upcoming

    monkeypatch.setattr(hub_module, "run_hub", nothing_ready)
    hub = Hub(loop)
    hub.start = lambda: None
    hub.add(1, "token", "s1", 1)
    loop.run_until_complete(hub.scan())
    hub.scan_requested.clear()
    hub.add(2, "token", "s2", 1)
    assert not hub.scan_requested.is_set()


def test_the_safety_net_looks_at_least_as_often_as_waiting_runners_need_touching(loop, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 2
    hub = Hub(loop)
    hub.listening = True  # PostgreSQL, its LISTEN connection up: a full look every 5 s
    assert hub.safety_interval() == 2


def test_a_scan_with_nothing_ready_is_two_reads(db, loop, runners, django_assert_num_queries):
    # Beyond MAX_CLAIM_AHEAD: no instant near enough to count its runs.
    pending(now=NOW + dt.timedelta(seconds=10), labels=["linux"])
    with django_assert_num_queries(2):  # anything ready? when is the next?
        served, upcoming = serve([waiter(loop, runners["linux"])], NOW)
    assert (served, upcoming) == ([], [(NOW + dt.timedelta(seconds=10), None)])


def test_latency_samples_are_written_together_shortly_after_their_answers_leave(db, loop):
    hub = Hub(loop)
    hub.observe_latencies([0.3])
    hub.observe_latencies([0.1, 0.2])
    assert hub.flush_due  # one write for both, LATENCY_FLUSH_DELAY from the first
    assert not Counter.objects.filter(name__startswith="croniq_dispatch_latency").exists()
    with steps_in_caller_thread():
        async_to_sync(hub.flush_latencies)()
    assert not hub.flush_due
    assert hub.latencies == []
    assert Counter.objects.value_of("croniq_dispatch_latency_seconds__count") == 3
    assert Counter.objects.value_of("croniq_dispatch_latency_seconds__sum_us") == 600_000
    buckets = dict(
        Counter.objects.filter(name="croniq_dispatch_latency_seconds__bucket").values_list(
            "labels", "value"
        )
    )
    assert buckets == {"le=0.1": 1, "le=0.25": 1, "le=0.5": 1}


def local_hub_with_a_waiter(loop):
    from dispatch.hub import _hubs

    current = _hubs[loop] = Hub(loop)
    current.waiters[object()] = None  # a poll waiting (start() is not needed here)
    return current


def test_work_committed_in_this_process_wakes_its_hub_at_once(db, loop):
    from dispatch.hub import wake_local_hubs
    from scheduler.firing import notifier

    current = local_hub_with_a_waiter(loop)

    def commit_elsewhere():
        # A run-now, a trigger or a retry, committed on another thread (on
        # PostgreSQL its NOTIFY opens that thread's connection: closed here).
        try:
            notifier.new_work()
        finally:
            connection.close()

    elsewhere = threading.Thread(target=commit_elsewhere)
    elsewhere.start()
    loop.run_until_complete(asyncio.wait_for(current.scan_requested.wait(), timeout=5))
    # The hub wakes before the thread's NOTIFY: wait for it, or it queries
    # after this test ended (database access is blocked there).
    elsewhere.join(timeout=5)
    assert wake_local_hubs in notifier._listeners


def test_work_made_inside_a_transaction_wakes_the_hub_only_at_its_commit(transactional_db, loop):
    from django.db import transaction

    from dispatch.hub import wake_local_hubs

    current = local_hub_with_a_waiter(loop)
    with transaction.atomic():
        wake_local_hubs()
        loop.run_until_complete(asyncio.sleep(0.05))
        assert not current.scan_requested.is_set()  # the poll would find nothing yet
    loop.run_until_complete(asyncio.wait_for(current.scan_requested.wait(), timeout=5))


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's commit counter")
def test_on_sqlite_the_watch_reads_executions_only_after_another_connection_commits(
    transactional_db, loop, runners
):
    from core.db_threads import run_db

    current = local_hub_with_a_waiter(loop)
    reads = []

    def counting(execute, sql, params, many, context):
        if "MAX" in sql.upper() and "scheduler_execution" in sql:
            reads.append(sql)
        return execute(sql, params, many, context)

    def wrap(on):
        wrappers = connection.execute_wrappers  # the database thread's connection
        wrappers.append(counting) if on else wrappers.remove(counting)

    loop.run_until_complete(run_db(wrap, True))
    watch = loop.create_task(current.watch())
    try:
        loop.run_until_complete(asyncio.sleep(0.3))  # a dozen looks, nobody commits
        assert len(reads) == 1 and not current.scan_requested.is_set()
        pending(now=NOW, labels=["linux"])  # committed by the test's connection
        loop.run_until_complete(asyncio.wait_for(current.scan_requested.wait(), timeout=10))
        assert len(reads) == 2
    finally:
        watch.cancel()
        loop.run_until_complete(asyncio.gather(watch, return_exceptions=True))
        loop.run_until_complete(run_db(wrap, False))


def count_looks(monkeypatch, path=None):
    """The instants the hub's SQLite watch looks for commits (of the
    database at `path`, if given, instead of the test database)."""
    from core import commits

    looks = []
    own_connection = commits.own_connection

    def counted(name):
        watcher = own_connection(name if path is None else str(path))
        moved = watcher.moved
        watcher.moved = lambda: looks.append(time.monotonic()) or moved()
        return watcher

    monkeypatch.setattr(commits, "own_connection", counted)
    return looks


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's commit counter")
def test_on_sqlite_only_new_work_quickens_the_watch_not_any_commit(
    transactional_db, loop, runners, monkeypatch
):

    monkeypatch.setattr(hints, "QUIET_AFTER", 0.2)
    looks = count_looks(monkeypatch)
    intervals = []  # the watch's sleeps between looks, in turn
    watch_interval = hints.watch_interval
    monkeypatch.setattr(
        hints,
        "watch_interval",
        lambda since: intervals.append(watch_interval(since)) or intervals[-1],
    )
    current = local_hub_with_a_waiter(loop)
    watch = loop.create_task(current.watch())

    def looks_within(seconds):
        start = time.monotonic()
        loop.run_until_complete(asyncio.sleep(seconds))
        return len([at for at in looks if at >= start])

    try:
        loop.run_until_complete(asyncio.sleep(0.4))  # quiet: every 100 ms
        Runner.objects.update(last_seen_at=NOW)  # a commit, but no new execution
        # At 25 ms it would look 20 times.
        assert looks_within(0.5) <= 0.5 / hints.QUIET_WATCH_INTERVAL + 2
        assert intervals[-1] == hints.QUIET_WATCH_INTERVAL
        quiet = len(intervals)
        pending(now=NOW, labels=["linux"])
        loop.run_until_complete(asyncio.wait_for(current.scan_requested.wait(), timeout=5))
        # The sleep after the look that found it (no await between the two).
        assert intervals[quiet:][-1] == hints.WATCH_INTERVAL  # new work: every 25 ms again
    finally:
        watch.cancel()
        loop.run_until_complete(asyncio.gather(watch, return_exceptions=True))


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's file writes")
def test_on_sqlite_the_watch_sleeps_until_the_database_is_written(
    transactional_db, loop, runners, monkeypatch, tmp_path
):
    import sqlite3

    from core import wakeups

    # The test database is in memory: the process's listener watches a file
    # of its own, which the test writes to as another process would commit.
    path = tmp_path / "watched.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    listener = wakeups.CommitListener(path)
    if not listener.delivers:
        pytest.skip("the database's writes cannot be watched here")
    monkeypatch.setattr(wakeups, "_listener", listener)
    reads = []
    signature = hints.work_signature
    monkeypatch.setattr(
        hints, "work_signature", lambda: reads.append(time.monotonic()) or signature()
    )
    current = local_hub_with_a_waiter(loop)
    watch = loop.create_task(current.watch())

    async def first_read():
        while not reads:
            await asyncio.sleep(0.01)

    try:
        loop.run_until_complete(asyncio.wait_for(first_read(), timeout=10))
        loop.run_until_complete(asyncio.sleep(0.3))  # the wake-up of its coming up is past
        start = time.monotonic()
        loop.run_until_complete(asyncio.sleep(0.5))
        # Nothing written: no read (every 100 ms at rest, it would look 5 times).
        assert reads and not [at for at in reads if at >= start]
        pending(now=NOW, labels=["linux"])
        writer.execute("INSERT INTO t VALUES (1)")
        loop.run_until_complete(asyncio.wait_for(current.scan_requested.wait(), timeout=5))
        assert current.listening  # it sees every commit: the full look is a guard
    finally:
        watch.cancel()
        loop.run_until_complete(asyncio.gather(watch, return_exceptions=True))
        writer.close()
    assert not current.listening


def test_the_work_signature_tells_new_or_re_pended_work_from_work_taken(db):
    first = pending(now=NOW, labels=["linux"])
    before = hints.work_signature()
    Execution.objects.filter(pk=first.pk).update(state=Execution.RUNNING)  # claimed
    claimed = hints.work_signature()
    assert not hints.more_work(before, claimed)

    Execution.objects.filter(pk=first.pk).update(state=Execution.PENDING)  # reaped: no new id
    released = hints.work_signature()
    assert released[0] == claimed[0]
    assert hints.more_work(claimed, released)

    second = pending(now=NOW, labels=["linux"])
    Execution.objects.filter(pk=first.pk).update(state=Execution.RUNNING)
    # One claimed and one new between two looks: the new id says it.
    assert hints.more_work(released, hints.work_signature())
    second_pending = hints.work_signature()
    Execution.objects.filter(pk=second.pk).update(state=Execution.RUNNING)
    Execution.objects.filter(pk=first.pk).update(state=Execution.PENDING)
    # As many pending as before, but another one: one was claimed and one
    # made ready again between two looks.
    assert hints.more_work(second_pending, hints.work_signature())


def test_a_hub_whose_watch_sees_every_commit_looks_in_full_every_5_seconds(settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 30
    current = Hub(asyncio.new_event_loop())
    try:
        assert current.safety_interval() == hub_module.SAFETY_SCAN_INTERVAL
        current.listening = True  # LISTEN up, or SQLite's watch blocking on writes
        assert current.safety_interval() == hub_module.LISTENING_SAFETY_SCAN_INTERVAL
    finally:
        current.loop.close()


def test_the_sqlite_watch_slows_down_once_nothing_was_committed_for_a_while():
    assert hints.watch_interval(0.0) == hints.WATCH_INTERVAL
    assert hints.watch_interval(hints.QUIET_AFTER - 0.01) == hints.WATCH_INTERVAL
    assert hints.watch_interval(hints.QUIET_AFTER) == hints.QUIET_WATCH_INTERVAL
    # Seen up to the quiet interval late, work the loop fires ahead is still
    # seen (and claimed) before its instant.
    assert ticks.FIRE_LEAD.total_seconds() > hints.QUIET_WATCH_INTERVAL


# -- large instants are claimed earlier --------------------------------------


@pytest.fixture
def large(monkeypatch):
    """Instants of more than 2 runs are large; each run past 2 adds 0.5 s."""
    monkeypatch.setattr(hub_module, "LARGE_INSTANT", 2)
    monkeypatch.setattr(hub_module, "CLAIM_AHEAD_PER_RUN", 0.5)


def test_the_claim_ahead_grows_with_the_instant_up_to_its_bound():
    assert hub_module.claim_ahead(1) == CLAIM_AHEAD
    assert hub_module.claim_ahead(hub_module.LARGE_INSTANT) == CLAIM_AHEAD
    assert hub_module.claim_ahead(hub_module.LARGE_INSTANT + 500) == pytest.approx(
        CLAIM_AHEAD + 500 * hub_module.CLAIM_AHEAD_PER_RUN
    )
    assert hub_module.claim_ahead(1_000_000) == hub_module.MAX_CLAIM_AHEAD


def test_the_work_to_come_names_the_large_instants_with_their_runs(db, loop, runners, large):
    pending(now=NOW + dt.timedelta(seconds=1), labels=["linux"])
    for _ in range(3):
        pending(now=NOW + dt.timedelta(seconds=2), labels=["linux"])
    pending(now=NOW + dt.timedelta(seconds=2.5), labels=["linux"])
    assert hub_module.upcoming_work(NOW) == [
        (NOW + dt.timedelta(seconds=1), None),
        (NOW + dt.timedelta(seconds=2), 3),
    ]


def test_the_hub_wakes_early_for_a_large_instant_and_claims_up_to_it(db, loop, runners, large):
    small = pending(now=NOW + dt.timedelta(seconds=1), labels=["linux"])
    crowd = [pending(now=NOW + dt.timedelta(seconds=2), labels=["linux"]) for _ in range(3)]
    hub = Hub(loop)
    hub.wake_at(hub_module.upcoming_work(NOW), NOW)
    # 3 runs: 0.65 s ahead, at NOW + 1.35 s, after the small instant's NOW + 0.85 s.
    assert hub.timer.when() - loop.time() == pytest.approx(0.85, abs=0.05)
    assert hub.claim_until(NOW) == NOW + dt.timedelta(seconds=CLAIM_AHEAD)

    begun = NOW + dt.timedelta(seconds=1.35)
    until = hub.claim_until(begun)
    assert until == NOW + dt.timedelta(seconds=2)
    served, upcoming = serve([waiter(loop, runners["gpu"], capacity=2, slots=2)], begun, until)
    [(_, handed)] = served
    assert [a["id"] for a in handed.assignments] == [small.pk, crowd[0].pk]
    assert handed.ready_at[1] == NOW + dt.timedelta(seconds=2)  # its `starts_in`: 0.65 s
    hub.wake_at(upcoming, begun)
    # A poll that comes back before the instant still claims up to it...
    assert hub.claim_until(begun + dt.timedelta(seconds=0.3)) == NOW + dt.timedelta(seconds=2)
    # ...and after it, the usual claim ahead again.
    after = NOW + dt.timedelta(seconds=2.1)
    assert hub.claim_until(after) == after + dt.timedelta(seconds=CLAIM_AHEAD)


def test_a_scan_serves_its_waiters_a_step_at_a_time_and_goes_through_them_all(loop, monkeypatch):
    """STEP_POLLS waiters a step, longest-waiting first: the steps after it
    serve the others even when the first served nothing."""
    monkeypatch.setattr(hub_module, "STEP_POLLS", 2)
    steps = []

    async def record(serve, waiters, now, until):
        steps.append([w.runner_id for w in waiters])
        return [], []  # nothing fits any of them

    monkeypatch.setattr(hub_module, "run_hub", record)
    hub = Hub(loop)
    hub.start = lambda: None
    for n in range(1, 6):
        hub.add(n, "token", f"s{n}", 1)
    for _ in range(3):
        hub.scan_requested.clear()
        loop.run_until_complete(hub.scan())
        more = hub.scan_requested.is_set()
    assert steps == [[1, 2], [3, 4], [5]]
    assert not more  # a whole pass served nothing: no scan follows
