"""The check state machine (checks.states) at fixed instants: no database,
no clock. docs/design.md §12."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from checks import states
from checks.states import (
    CHECK_DOWN,
    CHECK_UP,
    DOWN,
    EXIT,
    FAIL,
    LATE,
    LOG,
    NEW,
    PAUSED,
    START,
    SUCCESS,
    UP,
    Status,
    Timing,
)

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HOURLY = Timing(period=timedelta(hours=1), grace=timedelta(minutes=5))
BERLIN_0230 = Timing(schedule="30 2 * * *", timezone="Europe/Berlin", grace=timedelta(minutes=1))


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def up_since(timing: Timing, when: datetime) -> Status:
    return states.on_ping(timing, Status(), SUCCESS, when).status


# -- pings ---------------------------------------------------------------------


def test_a_new_check_is_up_after_its_first_success_without_an_event():
    outcome = states.on_ping(HOURLY, Status(), SUCCESS, T0)
    assert outcome.status == Status(
        state=UP, last_ping_at=T0, next_expected_at=at(60), down_at=at(65)
    )
    assert outcome.event is None


def test_a_new_check_that_never_pinged_is_never_late():
    assert states.on_tick(Status(), at(10_000)).status.state == NEW


def test_a_success_moves_the_deadlines_from_its_own_instant():
    status = up_since(HOURLY, T0)
    outcome = states.on_ping(HOURLY, status, SUCCESS, at(59))
    assert (outcome.status.next_expected_at, outcome.status.down_at) == (at(119), at(124))
    assert outcome.event is None


@pytest.mark.parametrize("kind, exit_status", [(FAIL, None), (EXIT, 1), (EXIT, 255)])
def test_a_failure_is_down_at_once_with_an_event(kind, exit_status):
    outcome = states.on_ping(HOURLY, up_since(HOURLY, T0), kind, at(1), exit_status)
    assert outcome.status.state == DOWN
    assert outcome.status.down_at is None  # nothing left to go down
    assert outcome.status.next_expected_at == at(61)  # still shown
    assert outcome.event == CHECK_DOWN


def test_a_failure_of_a_check_already_down_tells_nobody_again():
    down = states.on_ping(HOURLY, up_since(HOURLY, T0), FAIL, at(1)).status
    outcome = states.on_ping(HOURLY, down, FAIL, at(2))
    assert (outcome.status.state, outcome.event) == (DOWN, None)


def test_exit_status_zero_is_a_success():
    outcome = states.on_ping(HOURLY, Status(), EXIT, T0, 0)
    assert (outcome.status.state, outcome.event) == (UP, None)


def test_a_success_after_down_is_up_with_an_event():
    down = states.on_ping(HOURLY, up_since(HOURLY, T0), FAIL, at(1)).status
    outcome = states.on_ping(HOURLY, down, SUCCESS, at(30))
    assert outcome.status == Status(
        state=UP, last_ping_at=at(30), next_expected_at=at(90), down_at=at(95)
    )
    assert outcome.event == CHECK_UP


def test_a_success_of_a_late_check_is_up_without_an_event():
    late = states.on_tick(up_since(HOURLY, T0), at(61)).status
    assert late.state == LATE
    outcome = states.on_ping(HOURLY, late, SUCCESS, at(62))
    assert (outcome.status.state, outcome.event) == (UP, None)


def test_start_and_log_pings_change_no_state():
    up = up_since(HOURLY, T0)
    started = states.on_ping(HOURLY, up, START, at(30))
    assert started.status == replace(up, last_start_at=at(30))
    assert started.event is None
    logged = states.on_ping(HOURLY, started.status, LOG, at(31))
    assert logged.status == started.status
    assert states.on_ping(HOURLY, Status(), START, T0).status.state == NEW


def test_a_finishing_ping_measures_the_run_since_its_start():
    started = states.on_ping(HOURLY, up_since(HOURLY, T0), START, at(30)).status
    finished = states.on_ping(HOURLY, started, SUCCESS, at(32))
    assert finished.duration == timedelta(minutes=2)
    assert finished.status.last_start_at is None  # the next run starts afresh
    assert states.on_ping(HOURLY, finished.status, SUCCESS, at(40)).duration is None


def test_a_failing_run_is_measured_too():
    started = states.on_ping(HOURLY, up_since(HOURLY, T0), START, at(30)).status
    assert states.on_ping(HOURLY, started, EXIT, at(31), 2).duration == timedelta(minutes=1)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown ping kind 'boom'"):
        states.on_ping(HOURLY, Status(), "boom", T0)


# -- silence -------------------------------------------------------------------


@pytest.mark.parametrize(
    "minutes, state, event",
    [
        (59.99, UP, None),
        (60, LATE, None),  # due: late
        (64.99, LATE, None),
        (65, DOWN, CHECK_DOWN),  # grace over: down
    ],
)
def test_silence_makes_an_up_check_late_then_down(minutes, state, event):
    outcome = states.on_tick(up_since(HOURLY, T0), at(minutes))
    assert (outcome.status.state, outcome.event) == (state, event)


def test_a_late_check_goes_down_once_its_grace_is_over():
    late = states.on_tick(up_since(HOURLY, T0), at(61)).status
    assert states.on_tick(late, at(64)).status.state == LATE
    outcome = states.on_tick(late, at(65))
    assert (outcome.status.state, outcome.status.down_at, outcome.event) == (
        DOWN,
        None,
        CHECK_DOWN,
    )


def test_down_stays_down_without_a_second_event():
    down = states.on_tick(up_since(HOURLY, T0), at(70)).status
    assert states.on_tick(down, at(500)).event is None


def test_a_paused_check_has_no_deadlines_and_a_ping_resumes_it():
    pausing = states.paused(up_since(HOURLY, T0))
    assert (pausing.state, pausing.next_expected_at, pausing.down_at) == (PAUSED, None, None)
    assert states.on_tick(pausing, at(10_000)).status.state == PAUSED
    assert states.on_ping(HOURLY, pausing, START, at(5)).status.state == PAUSED
    resumed = states.on_ping(HOURLY, pausing, SUCCESS, at(100))
    assert (resumed.status.state, resumed.event) == (UP, None)
    failed = states.on_ping(HOURLY, pausing, FAIL, at(100))
    assert (failed.status.state, failed.event) == (DOWN, CHECK_DOWN)


def test_grace_zero_goes_down_when_due():
    timing = replace(HOURLY, grace=timedelta(0))
    assert states.on_tick(up_since(timing, T0), at(60)).status.state == DOWN


# -- cron schedules, across DST (Europe/Berlin, 2026) ---------------------------


def test_a_daily_schedule_expects_the_next_instant_after_the_ping():
    # 02:30:05 CEST on 1 June is 00:30:05 UTC; the next 02:30 CEST is a day on.
    ping = datetime(2026, 6, 1, 0, 30, 5, tzinfo=UTC)
    status = up_since(BERLIN_0230, ping)
    assert status.next_expected_at == datetime(2026, 6, 2, 0, 30, tzinfo=UTC)
    assert status.down_at == datetime(2026, 6, 2, 0, 31, tzinfo=UTC)


def test_spring_forward_expects_the_run_at_the_end_of_the_gap():
    # 29 March 2026: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist;
    # the schedule fires at 03:00 CEST (01:00 UTC), 22.5 hours after the ping.
    ping = datetime(2026, 3, 28, 1, 30, 5, tzinfo=UTC)  # 02:30:05 CET
    status = up_since(BERLIN_0230, ping)
    assert status.next_expected_at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert states.on_tick(status, datetime(2026, 3, 29, 0, 59, tzinfo=UTC)).status.state == UP
    assert states.on_tick(status, datetime(2026, 3, 29, 1, 0, tzinfo=UTC)).status.state == LATE
    assert states.on_tick(status, datetime(2026, 3, 29, 1, 1, tzinfo=UTC)).status.state == DOWN


def test_fall_back_expects_one_run_not_two_and_the_next_a_day_and_an_hour_on():
    # 25 October 2026: 03:00 CEST falls back to 02:00 CET, so 02:30 happens
    # twice; the schedule fires once, at the first (00:30 UTC).
    before = up_since(BERLIN_0230, datetime(2026, 10, 24, 0, 30, 5, tzinfo=UTC))
    assert before.next_expected_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    status = up_since(BERLIN_0230, datetime(2026, 10, 25, 0, 30, 5, tzinfo=UTC))
    # Not expected again at the second 02:30 (01:30 UTC) ...
    assert states.on_tick(status, datetime(2026, 10, 25, 1, 35, tzinfo=UTC)).status.state == UP
    # ... but at 02:30 CET the next day: 25 hours after the ping.
    assert status.next_expected_at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_an_hourly_schedule_expects_every_real_hour_through_fall_back():
    timing = replace(BERLIN_0230, schedule="@hourly")
    first = up_since(timing, datetime(2026, 10, 25, 0, 0, 5, tzinfo=UTC))  # 02:00 CEST
    assert first.next_expected_at == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # 02:00 CET
    second = up_since(timing, datetime(2026, 10, 25, 1, 0, 5, tzinfo=UTC))
    assert second.next_expected_at == datetime(2026, 10, 25, 2, 0, tzinfo=UTC)


def test_a_hashed_schedule_is_seeded_by_the_check_s_name():
    a = states.expected_after(Timing(schedule="H * * * *", key="backup-a"), T0)
    b = states.expected_after(Timing(schedule="H * * * *", key="backup-b"), T0)
    again = states.expected_after(Timing(schedule="H * * * *", key="backup-a"), T0)
    assert a == again and a != b


# -- edits and validation ---------------------------------------------------------


def test_a_longer_period_gives_a_late_check_its_new_deadline():
    late = states.on_tick(up_since(HOURLY, T0), at(61)).status
    longer = replace(HOURLY, period=timedelta(hours=2))
    retimed = states.retimed(longer, late)
    assert (retimed.state, retimed.next_expected_at, retimed.down_at) == (UP, at(120), at(125))


@pytest.mark.parametrize("state", [NEW, DOWN, PAUSED])
def test_retiming_leaves_checks_without_deadlines_alone(state):
    status = replace(up_since(HOURLY, T0), state=state)
    assert states.retimed(replace(HOURLY, period=timedelta(hours=2)), status) == status


@pytest.mark.parametrize(
    "schedule, problem",
    [
        ("@every 5m", "@every is not a check schedule"),
        ("61 * * * *", "minute"),
        ("@fortnightly", "unknown macro"),
        ("", "empty"),
        ("0 0 30 2 *", "never fires"),  # 30 February
    ],
)
def test_bad_schedules_are_explained(schedule, problem):
    assert problem in (states.schedule_problem(schedule, "UTC", "x", T0) or "")


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "@daily", "30 2 * * 1-5", "H 3 * * *"])
def test_good_schedules_pass(schedule):
    assert states.schedule_problem(schedule, "UTC", "nightly", T0) is None
