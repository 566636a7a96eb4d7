"""An instant shared by many jobs fires earlier than FIRE_LEAD, in
proportion to its size (`ticks.fire_lead_for`), so its runs can be claimed
and handed out ahead (`dispatch.hub.claim_ahead`). Only that instant's jobs
fire early, each for that instant alone."""

import datetime as dt

import pytest

from scheduler.firing import due, ticks
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
LEAD = ticks.FIRE_LEAD
MS = dt.timedelta(milliseconds=1)


@pytest.fixture
def large(monkeypatch):
    """Instants of more than 3 jobs are large; each job past 3 adds 100 ms."""
    monkeypatch.setattr(due, "LARGE_INSTANT", 3)
    monkeypatch.setattr(due, "LEAD_PER_JOB", 100 * MS)
    return 3


def jobs_at(instant, count, schedule="@every 1s"):
    return [JobFactory(schedule=schedule, next_run_at=instant) for _ in range(count)]


def test_the_lead_grows_with_the_instant_up_to_its_bound():
    assert ticks.fire_lead_for(1) == LEAD
    assert ticks.fire_lead_for(ticks.LARGE_INSTANT) == LEAD
    assert ticks.fire_lead_for(ticks.LARGE_INSTANT + 100) == LEAD + 100 * ticks.LEAD_PER_JOB
    assert ticks.fire_lead_for(1_000_000) == ticks.MAX_FIRE_LEAD
    # A caller that fires at the instant fires every instant there.
    assert ticks.fire_lead_for(1_000_000, ticks.NO_LEAD) == ticks.NO_LEAD


def test_the_loop_wakes_earlier_for_a_large_instant(large):
    jobs_at(T0 + dt.timedelta(seconds=3), large)  # not large: 3 jobs
    firing = ticks.next_firing(T0, LEAD)
    assert firing.at == T0 + dt.timedelta(seconds=3) - LEAD
    assert firing.large == ()

    jobs_at(T0 + dt.timedelta(seconds=3), 2)  # now 5: 2 past the bound
    firing = ticks.next_firing(T0, LEAD)
    assert firing.at == T0 + dt.timedelta(seconds=3) - LEAD - 200 * MS
    assert firing.ahead(firing.at - MS) == frozenset()
    assert firing.ahead(firing.at) == {T0 + dt.timedelta(seconds=3)}


def test_a_large_instant_behind_a_small_one_is_seen(large):
    """The earliest job is not the large instant: it still brings the wake forward."""
    jobs_at(T0 + dt.timedelta(seconds=1), 1)
    jobs_at(T0 + dt.timedelta(seconds=2), large + 10)  # lead 1.2 s: from T0 + 0.8 s
    firing = ticks.next_firing(T0, LEAD)
    assert firing.at == T0 + dt.timedelta(seconds=2) - LEAD - 1000 * MS


def test_instants_beyond_the_bound_are_not_counted(large, django_assert_num_queries):
    jobs_at(T0 + ticks.LOOKAHEAD + dt.timedelta(seconds=1), large + 10)
    with django_assert_num_queries(1):  # at rest, one query as before
        firing = ticks.next_firing(T0, LEAD)
    assert firing.large == ()


def test_only_the_large_instants_jobs_fire_early_each_for_that_instant(large):
    instant = T0 + dt.timedelta(seconds=2)
    early = jobs_at(instant, large + 2)  # lead 400 ms
    small = jobs_at(instant - 100 * MS, 1)  # due from instant - 300 ms
    firing = ticks.next_firing(T0, LEAD)
    now = firing.at
    assert now == instant - 400 * MS

    created = ticks.fire_due(now, LEAD, ticks.Held(), firing.ahead(now))

    assert created == len(early)
    fired = Execution.objects.filter(job__in=early)
    # "@every 1s": one occurrence each, the large instant's, not those after it.
    assert sorted(fired.values_list("scheduled_for", flat=True)) == [instant] * len(early)
    assert set(fired.values_list("run_after", flat=True)) == {instant}
    assert not Execution.objects.filter(job__in=small).exists()
    for job in Job.objects.filter(pk__in=[j.pk for j in early]):
        assert job.next_run_at == instant + dt.timedelta(seconds=1)


def test_a_job_with_an_open_run_in_a_large_instant_is_held_to_its_instant(large):
    instant = T0 + dt.timedelta(seconds=2)
    jobs_at(instant, large + 2)
    busy = JobFactory(schedule="@every 1s", next_run_at=instant, overlap=Job.SKIP)
    Execution.objects.create(
        job=busy, scheduled_for=T0, run_after=T0, created_at=T0, state=Execution.RUNNING,
        singleton=False,
    )  # fmt: skip
    firing = ticks.next_firing(T0, LEAD)
    held = ticks.Held()
    ticks.fire_due(firing.at, LEAD, held, firing.ahead(firing.at))
    assert held == {busy.pk}
    assert not Execution.objects.filter(job=busy, scheduled_for=instant).exists()


def test_the_scheduler_loop_fires_a_large_instant_early(large):
    instant = T0 + dt.timedelta(seconds=2)
    jobs_at(instant, large + 2)
    loop = SchedulerLoop(clock=lambda: T0)
    assert loop.earliest(T0) == instant - 400 * MS
    assert loop.tick(instant - 500 * MS).get("fired") is None
    loop.earliest_due = None  # read anew, as after a tick that did something
    assert loop.tick(instant - 400 * MS).get("fired") == large + 2


def test_an_instant_that_comes_due_while_a_large_one_fires_goes_next(large, monkeypatch):
    monkeypatch.setattr(ticks, "TRIGGER_BATCH", 2)
    instant = T0 + dt.timedelta(seconds=2)
    crowd = jobs_at(instant, large + 3)  # lead 500 ms: from instant - 0.5 s
    soon = jobs_at(instant - 200 * MS, 1)  # due from instant - 0.4 s
    firing = ticks.next_firing(T0, LEAD)
    start = firing.at
    times = iter([start + 150 * MS, start + 160 * MS, start + 170 * MS])

    ticks.fire_due(start, LEAD, ticks.Held(), firing.ahead(start), clock=lambda: next(times))

    created = dict(Execution.objects.values_list("job_id", "created_at"))
    assert created[soon[0].pk] == start + 150 * MS  # the second batch, before the crowd's rest
    crowd_times = sorted(created[job.pk] for job in crowd)
    assert crowd_times[:2] == [start, start]
    assert crowd_times[-1] > start + 150 * MS


def test_a_clock_behind_the_tick_does_not_take_the_batches_back(large, monkeypatch):
    monkeypatch.setattr(ticks, "TRIGGER_BATCH", 2)
    now = T0 + dt.timedelta(seconds=2)
    jobs_at(now, 5)
    ticks.fire_due(now, LEAD, ticks.Held(), clock=lambda: T0)
    assert set(Execution.objects.values_list("created_at", flat=True)) == {now}


def test_a_quiet_loop_looks_again_when_a_large_instant_comes_within_reach(large):
    """Nothing else fires to make it read again: its read of an instant
    30 s away is looked at again once that instant is LOOKAHEAD away."""
    instant = T0 + dt.timedelta(seconds=30)
    jobs_at(instant, large + 2)  # lead 400 ms
    loop = SchedulerLoop(clock=lambda: T0)
    assert loop.earliest(T0) == instant - LEAD  # too far to count
    assert loop.earliest_due.recheck == instant - LEAD - ticks.LOOKAHEAD
    assert loop.earliest(loop.earliest_due.recheck - MS) == instant - LEAD  # trusted until then
    assert loop.earliest(instant - ticks.LOOKAHEAD) == instant - 400 * MS


def test_a_loop_near_its_jobs_looks_again_every_few_seconds(large):
    """A large instant just past LOOKAHEAD is counted at the next look,
    before its lead begins."""
    jobs_at(T0 + dt.timedelta(seconds=1), 1)
    far = T0 + ticks.LOOKAHEAD + dt.timedelta(seconds=1)
    jobs_at(far, large + 2)
    firing = ticks.next_firing(T0, LEAD)
    assert firing.large == ()
    assert firing.recheck == T0 + ticks.LARGE_LOOK_EVERY
    assert firing.recheck < far - ticks.fire_lead_for(large + 2)
    assert ticks.next_firing(firing.recheck, LEAD).large == ((far, 400 * MS),)
