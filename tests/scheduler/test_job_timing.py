"""A job's timing beyond its one schedule (docs/design.md §14): several
schedules on their own clocks, one-shot instants, bounds and a run limit,
all through `Job.upcoming` / `next_fire_after`, at fixed instants. No
database: unsaved jobs, calendars as CalendarRules."""

import datetime as dt

import pytest

from calendars.periods import Period
from calendars.rules import CalendarRules
from scheduler.models import Job

UTC = dt.UTC
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a Monday


def at(text):
    return dt.datetime.fromisoformat(text)


def iso(instants):
    return [i.isoformat() for i in instants]


def job(calendar=None, **fields):
    found = Job(name=fields.pop("name", "report"), command="true", **fields)
    if calendar is not None:
        found.calendar_id = 1
        found._calendar_rules = (1, calendar)
    return found


def test_it_fires_at_the_union_of_its_schedules_each_on_its_own_clock():
    report = job(
        schedule="0 9 * * *",
        timezone="Europe/Berlin",
        schedules=["30 9 * * *", {"cron": "0 9 * * *", "timezone": "America/New_York"}],
    )
    assert iso(report.upcoming(T0, 6)) == [
        "2026-06-01T13:00:00+00:00",  # 09:00 in New York
        "2026-06-02T07:00:00+00:00",  # 09:00 in Berlin
        "2026-06-02T07:30:00+00:00",
        "2026-06-02T13:00:00+00:00",
        "2026-06-03T07:00:00+00:00",
        "2026-06-03T07:30:00+00:00",
    ]


def test_two_schedules_giving_the_same_instant_fire_once():
    hourly = job(schedule="0 * * * *", schedules=["0 */2 * * *", "@hourly"])
    assert iso(hourly.upcoming(T0, 3)) == [
        "2026-06-01T13:00:00+00:00",
        "2026-06-01T14:00:00+00:00",
        "2026-06-01T15:00:00+00:00",
    ]


def test_schedules_alone_need_no_schedule():
    twice = job(schedule="", schedules=["0 8 * * *", "0 20 * * *"])
    assert iso(twice.upcoming(T0, 3)) == [
        "2026-06-01T20:00:00+00:00",
        "2026-06-02T08:00:00+00:00",
        "2026-06-02T20:00:00+00:00",
    ]


def test_one_shot_instants_fire_once_each_beside_a_schedule():
    daily = job(
        schedule="0 0 * * *",
        at=["2026-06-01T15:30:00+02:00", "2026-06-03T00:00:00Z", "2026-06-01T13:30:00Z"],
    )
    assert iso(daily.upcoming(T0, 5)) == [
        "2026-06-01T13:30:00+00:00",  # the two spellings of one instant: once
        "2026-06-02T00:00:00+00:00",
        "2026-06-03T00:00:00+00:00",  # the schedule's and the one-shot's: once
        "2026-06-04T00:00:00+00:00",
        "2026-06-05T00:00:00+00:00",
    ]


def test_one_shot_instants_alone_end_after_the_last():
    once = job(schedule="", at=["2026-06-02T08:00:00Z", "2026-05-01T08:00:00Z"])
    assert iso(once.upcoming(T0, 5)) == ["2026-06-02T08:00:00+00:00"]
    assert once.upcoming(at("2026-06-02T08:00:00+00:00"), 5) == []
    assert once.no_fires_reason(at("2026-06-02T08:00:00+00:00")) == (
        "its one-shot instants (at) have all passed"
    )


def test_not_before_and_not_after_bound_every_source_inclusively():
    bounded = job(
        schedule="0 * * * *",
        at=["2026-06-01T18:30:00Z", "2026-06-01T20:30:00Z"],
        not_before=at("2026-06-01T17:00:00+00:00"),
        not_after=at("2026-06-01T19:00:00+00:00"),
    )
    assert iso(bounded.upcoming(T0, 10)) == [
        "2026-06-01T17:00:00+00:00",  # not_before itself fires
        "2026-06-01T18:00:00+00:00",
        "2026-06-01T18:30:00+00:00",
        "2026-06-01T19:00:00+00:00",  # not_after itself fires
    ]
    assert bounded.no_fires_reason(at("2026-06-01T19:00:00+00:00")).startswith(
        "its last allowed instant (not_after 2026-06-01T19:00:00+00:00)"
    )


def test_bounds_judge_the_fire_instant_with_its_jitter():
    spread = job(schedule="0 * * * *", jitter=600, not_after=at("2026-06-01T14:00:00+00:00"))
    offset = spread.offset
    assert dt.timedelta(0) < offset < dt.timedelta(minutes=10)
    # 14:00 plus the jitter is after not_after: the last is 13:00 plus it.
    assert spread.upcoming(T0, 5) == [T0 + offset, at("2026-06-01T13:00:00+00:00") + offset]


def test_an_every_schedule_alone_counts_from_not_before():
    later = job(schedule="@every 7m", not_before=at("2026-06-01T13:00:00+00:00"))
    assert iso(later.upcoming(T0, 3)) == [
        "2026-06-01T13:00:00+00:00",
        "2026-06-01T13:07:00+00:00",
        "2026-06-01T13:14:00+00:00",
    ]


def test_an_every_schedule_in_a_union_runs_on_the_epoch_grid():
    mixed = job(schedule="", schedules=["@every 15m", "7 * * * *"])
    after = at("2026-06-01T12:03:21+00:00")
    assert iso(mixed.upcoming(after, 5)) == [
        "2026-06-01T12:07:00+00:00",
        "2026-06-01T12:15:00+00:00",
        "2026-06-01T12:30:00+00:00",
        "2026-06-01T12:45:00+00:00",
        "2026-06-01T13:00:00+00:00",
    ]
    # The grid does not move with the instants of the other schedule.
    assert mixed.next_fire_after(at("2026-06-01T12:07:00+00:00")) == at("2026-06-01T12:15:00+00:00")


def test_an_every_schedule_in_a_union_runs_on_the_grid_of_not_before():
    mixed = job(
        schedule="@every 1h",
        at=["2026-06-01T12:10:00Z"],
        not_before=at("2026-06-01T11:20:00+00:00"),
    )
    assert iso(mixed.upcoming(T0, 3)) == [
        "2026-06-01T12:10:00+00:00",
        "2026-06-01T12:20:00+00:00",
        "2026-06-01T13:20:00+00:00",
    ]


BERLIN_WORKDAYS = CalendarRules(
    timezone="Europe/Berlin",
    weekdays=("mon", "tue", "wed", "thu", "fri"),
    exclude=(Period(dt.date(2026, 6, 3), dt.date(2026, 6, 3), "closed"),),
    name="workdays",
)


def test_the_calendar_gates_every_source_and_a_blocked_one_skips_ahead():
    gated = job(
        BERLIN_WORKDAYS,
        schedule="0 9 * * *",
        timezone="Europe/Berlin",
        schedules=[{"cron": "0 18 * * *", "timezone": "UTC"}],
        at=["2026-06-06T10:00:00Z", "2026-06-08T10:00:00Z"],  # a Saturday, a Monday
    )
    blocked = []
    assert iso(gated.upcoming(T0, 6, blocked)) == [
        "2026-06-01T18:00:00+00:00",
        "2026-06-02T07:00:00+00:00",
        "2026-06-02T18:00:00+00:00",
        "2026-06-04T07:00:00+00:00",  # Wednesday 3 June is closed
        "2026-06-04T18:00:00+00:00",
        "2026-06-05T07:00:00+00:00",
    ]
    assert iso(blocked) == ["2026-06-03T07:00:00+00:00", "2026-06-03T18:00:00+00:00"]
    after_friday = at("2026-06-05T18:00:00+00:00")
    # The Saturday instant is skipped; the weekend's schedules too.
    assert iso(gated.upcoming(after_friday, 3)) == [
        "2026-06-08T07:00:00+00:00",
        "2026-06-08T10:00:00+00:00",
        "2026-06-08T18:00:00+00:00",
    ]


def test_with_defer_blocked_occurrences_of_every_source_coalesce_into_one():
    deferred = job(
        BERLIN_WORKDAYS,
        schedule="0 9 * * *",
        timezone="Europe/Berlin",
        calendar_policy=Job.DEFER,
        schedules=[{"cron": "0 18 * * *", "timezone": "UTC"}],
        at=["2026-06-06T10:00:00Z"],
    )
    after_friday = at("2026-06-05T18:00:00+00:00")
    assert iso(deferred.upcoming(after_friday, 3)) == [
        "2026-06-07T22:00:00+00:00",  # Monday 00:00 in Berlin: the weekend's, once
        "2026-06-08T07:00:00+00:00",
        "2026-06-08T18:00:00+00:00",
    ]


def test_a_deferred_occurrence_past_not_after_does_not_fire():
    deferred = job(
        BERLIN_WORKDAYS,
        schedule="0 12 * * *",
        calendar_policy=Job.DEFER,
        not_after=at("2026-06-07T12:00:00+00:00"),
    )
    assert iso(deferred.upcoming(at("2026-06-05T13:00:00+00:00"), 3)) == []


def test_max_runs_ends_the_preview_after_the_runs_left():
    limited = job(schedule="0 * * * *", max_runs=5, scheduled_runs=3)
    assert iso(limited.upcoming(T0, 10)) == [
        "2026-06-01T13:00:00+00:00",
        "2026-06-01T14:00:00+00:00",
    ]


def test_a_preview_from_later_counts_the_occurrences_the_loop_fires_first():
    limited = job(schedule="0 * * * *", max_runs=5, scheduled_runs=1, next_run_at=T0)
    # The loop counts 12:00 and 13:00 before 13:30: two runs are left.
    assert iso(limited.upcoming(at("2026-06-01T13:30:00+00:00"), 10)) == [
        "2026-06-01T14:00:00+00:00",
        "2026-06-01T15:00:00+00:00",
    ]


def test_a_completed_job_never_fires_and_says_why():
    done = job(schedule="0 * * * *", max_runs=2, scheduled_runs=2)
    assert done.completed
    assert done.next_fire_after(T0) is None
    assert done.upcoming(T0, 5) == []
    assert done.no_fires_reason(T0) == (
        "it has completed: its 2 scheduled runs (max_runs) have come"
    )


def test_editing_a_completed_job_keeps_it_disabled_until_max_runs_is_raised():
    done = job(schedule="0 * * * *", max_runs=2, scheduled_runs=2, enabled=True)
    done.sync_run_limit()
    assert not done.enabled
    done.max_runs, done.enabled = 3, True
    done.sync_run_limit()
    assert done.enabled and done.runs_left == 1
    done.max_runs = None
    done.sync_run_limit()
    assert done.scheduled_runs == 0  # a limit set later counts from then


def test_a_paused_job_previews_from_the_end_of_its_pause():
    paused = job(
        schedule="",
        schedules=["0 * * * *"],
        at=["2026-06-01T14:30:00Z"],
        paused_at=T0,
        paused_until=at("2026-06-01T14:00:00+00:00"),
    )
    assert iso(paused.upcoming(T0, 3)) == [
        "2026-06-01T14:00:00+00:00",  # an occurrence at the pause's end fires
        "2026-06-01T14:30:00+00:00",
        "2026-06-01T15:00:00+00:00",
    ]


def test_schedules_follow_dst_on_their_own_clock():
    # 30 2 on the spring-forward day fires at 03:00 in Berlin (the Debian
    # rule); New York's clock does not change that day.
    spring = job(
        schedule="30 2 * * *",
        timezone="Europe/Berlin",
        schedules=[{"cron": "30 2 * * *", "timezone": "America/New_York"}],
    )
    assert iso(spring.upcoming(at("2027-03-27T12:00:00+00:00"), 3)) == [
        "2027-03-28T01:00:00+00:00",  # 03:00 CEST, right after the gap
        "2027-03-28T06:30:00+00:00",  # 02:30 EDT
        "2027-03-29T00:30:00+00:00",
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"schedule": "0 * * * *"},
        {"schedule": "@every 5m", "next_run_at": T0},
        {"schedule": "@business_day 3 09:00", "timezone": "Europe/Berlin"},
    ],
)
def test_a_job_without_the_new_fields_fires_as_before(fields):
    from scheduler.jobs.cron import next_fire

    plain = job(**fields)
    assert plain.timing is None
    expected, after = [], T0
    for _ in range(3):
        after = next_fire(plain.schedule, plain.timezone, None, after, key=plain.name)
        expected.append(after)
    assert plain.upcoming(T0, 3) == expected
