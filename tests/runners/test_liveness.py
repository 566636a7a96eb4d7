"""How silent a runner looks, and what a running run of a silent runner
says of itself, at fixed instants (dispatch.liveness)."""

from datetime import UTC, datetime, timedelta

import pytest

from dispatch import liveness, loop_steps
from dispatch.liveness import Liveness, describe, run_liveness, span
from runners.models import Runner
from scheduler.models import Execution
from scheduler.runs import lifecycle
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BEAT = timedelta(seconds=10)


def ago(seconds):
    return NOW - timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("seconds", "kind"),
    [
        (0, "fresh"),
        (10, "fresh"),  # the next heartbeat is due just now
        (15, "fresh"),
        (15.5, "quiet"),  # a heartbeat half an interval late
        (20, "quiet"),
        (20.5, "silent"),  # a whole interval beyond the one that was due
        (30, "silent"),
        (30.5, "silent"),  # past the offline threshold, not marked yet
        (3600, "silent"),
    ],
)
def test_a_runner_turns_quiet_then_silent_by_heartbeat_intervals(seconds, kind):
    assert liveness.liveness(Runner.ONLINE, ago(seconds), NOW, BEAT).kind == kind
    assert liveness.liveness(Runner.DRAINING, ago(seconds), NOW, BEAT).kind == kind


def test_an_offline_runner_is_offline_whatever_its_age():
    assert liveness.liveness(Runner.OFFLINE, NOW, NOW, BEAT).kind == "offline"
    assert liveness.liveness(Runner.OFFLINE, ago(25), NOW, BEAT) == Liveness(
        "offline", timedelta(seconds=25)
    )


def test_a_last_seen_in_the_future_counts_as_now():
    assert liveness.liveness(Runner.ONLINE, NOW + timedelta(seconds=3), NOW, BEAT).age == (
        timedelta(0)
    )


def test_the_thresholds_follow_the_heartbeat_setting(settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 2.0
    assert liveness.liveness(Runner.ONLINE, ago(3.5), NOW).kind == "quiet"
    assert liveness.liveness(Runner.ONLINE, ago(4.5), NOW).kind == "silent"
    assert liveness.silent_after() == timedelta(seconds=4)
    assert liveness.offline_after() == timedelta(seconds=6)


def test_silence_comes_before_the_loop_marks_the_runner_offline(db, settings):
    """Between 2 and 3 intervals a runner is silent and still online; at 3
    the loop's step marks it offline, and the row says offline."""
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    runner = RunnerFactory(last_seen_at=ago(25))
    seen = liveness.liveness(runner.state, runner.last_seen_at, NOW)
    assert (runner.state, seen.kind, liveness.shown_state(runner.state, seen)) == (
        "online",
        "silent",
        "silent",
    )
    assert loop_steps.update_runner_states(NOW) == 0
    later = NOW + timedelta(seconds=6)
    assert loop_steps.update_runner_states(later) == 1
    runner.refresh_from_db()
    seen = liveness.liveness(runner.state, runner.last_seen_at, later)
    assert (runner.state, liveness.shown_state(runner.state, seen)) == ("offline", "offline")


def test_only_a_silent_runner_shows_a_state_of_its_own():
    def shown(state, seconds):
        return liveness.shown_state(state, liveness.liveness(state, ago(seconds), NOW, BEAT))

    assert shown(Runner.ONLINE, 17) == "online"  # quiet: a colour, not a state
    assert shown(Runner.DRAINING, 5) == "draining"
    assert shown(Runner.DRAINING, 25) == "silent"
    assert shown(Runner.OFFLINE, 25) == "offline"


# -- the words ------------------------------------------------------------------


def silent(seconds, kind="silent"):
    return Liveness(kind, timedelta(seconds=seconds))


@pytest.mark.parametrize(
    ("seen", "lease_left", "no_retry", "text"),
    [
        (silent(15), 7, None, "runner silent 15 s; lease expires in 7 s; it will be retried"),
        (silent(21.9), 8.2, None, "runner silent 21 s; lease expires in 9 s; it will be retried"),
        (silent(31), -1.5, None, "runner silent 31 s; lease ran out 1 s ago; it will be retried"),
        (
            silent(25),
            5,
            "3 earlier attempts were lost (CRONIQ_LOST_RETRIES is 3)",
            "runner silent 25 s; lease expires in 5 s; it will not be retried:"
            " 3 earlier attempts were lost (CRONIQ_LOST_RETRIES is 3)",
        ),
        (
            silent(35, "offline"),
            25,
            None,
            "runner offline, silent 35 s; lease expires in 25 s; it will be retried",
        ),
        (
            silent(2, "fresh"),
            -3,
            None,
            "lease ran out 3 s ago; runner last seen 2 s ago; it will be retried",
        ),
        (
            silent(130),
            600,
            None,
            "runner silent 2 min 10 s; lease expires in 10 min; it will be retried",
        ),  # fmt: skip
    ],
)
def test_what_a_run_of_a_silent_runner_says(seen, lease_left, no_retry, text):
    said = describe(seen, timedelta(seconds=lease_left), no_retry)
    assert said.text == text
    assert said.kind == ("lapsed" if seen.kind == "fresh" else "silent")
    assert said.label == ("lease ran out" if seen.kind == "fresh" else "runner silent")


def test_a_run_pinned_to_its_runner_is_retried_there_alone():
    assert describe(silent(25), BEAT, None, pinned_to="web-1").text.endswith(
        "it will be retried on web-1 alone, if it is back before it is marked offline"
    )
    assert describe(silent(35, "offline"), BEAT, None, pinned_to="web-1").text.endswith(
        "it will not be retried: it is pinned to web-1, which is offline"
    )


@pytest.mark.parametrize(
    ("seconds", "up", "text"),
    [
        (0, False, "0 s"),
        (0.2, True, "1 s"),
        (59.9, False, "59 s"),
        (60, False, "1 min"),
        (61, False, "1 min 1 s"),
        (3600, False, "1 h"),
        (3725, False, "1 h 2 min"),
    ],
)
def test_spans_read_in_whole_seconds(seconds, up, text):
    assert span(timedelta(seconds=seconds), up=up) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s ago"), (17.9, "17 s ago"), (60, "1 min ago"), (7199, "1 h ago"), (90000, "1 d ago")],
)
def test_ages_read_in_whole_units(seconds, text):
    assert liveness.ago(timedelta(seconds=seconds)) == text


# -- a running execution, read from the database --------------------------------


def running(runner, lease_left=10, attempt=1, **fields):
    job = fields.pop("job", None) or JobFactory()
    fields.setdefault("state", Execution.RUNNING)
    return ExecutionFactory(
        job=job,
        scheduled_for=NOW - timedelta(minutes=1),
        attempt=attempt,
        runner=runner,
        lease=attempt,
        claimed_at=NOW - timedelta(seconds=40),
        lease_expires_at=NOW + timedelta(seconds=lease_left),
        **fields,
    )


def test_a_run_whose_runner_speaks_says_nothing(db, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    execution = running(RunnerFactory(last_seen_at=ago(17)))  # quiet, not silent
    assert run_liveness(execution, NOW) is None


def test_a_run_that_is_not_running_says_nothing(db):
    runner = RunnerFactory(last_seen_at=ago(600))
    execution = running(runner)
    Execution.objects.filter(pk=execution.pk).update(state=Execution.SUCCEEDED)
    execution.refresh_from_db()
    assert run_liveness(execution, NOW) is None


def test_a_run_of_a_silent_runner_says_so_with_its_lease(db, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    execution = running(RunnerFactory(last_seen_at=ago(23)), lease_left=7)
    said = run_liveness(execution, NOW)
    assert said.text == "runner silent 23 s; lease expires in 7 s; it will be retried"
    assert said.as_json() == {"kind": "silent", "label": "runner silent", "text": said.text}


def test_a_run_whose_lease_ran_out_says_so_though_its_runner_speaks(db, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    execution = running(RunnerFactory(last_seen_at=ago(1)), lease_left=-2)
    assert run_liveness(execution, NOW).text == (
        "lease ran out 2 s ago; runner last seen 1 s ago; it will be retried"
    )


@pytest.mark.parametrize(
    ("allowed", "earlier_lost", "why"),
    [
        (3, 0, None),
        (3, 2, None),
        (3, 3, "3 earlier attempts were lost (CRONIQ_LOST_RETRIES is 3)"),
        (1, 1, "1 earlier attempt was lost (CRONIQ_LOST_RETRIES is 1)"),
        (0, 0, "CRONIQ_LOST_RETRIES is 0"),
    ],
)
def test_the_retry_it_announces_is_the_one_the_reaper_makes(
    db, settings, allowed, earlier_lost, why
):
    """The page says what the reaper will do: a run whose lease runs out
    gets a retry exactly when `no_retry_if_lost` said it would."""
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    settings.CRONIQ_LOST_RETRIES = allowed
    runner = RunnerFactory(last_seen_at=ago(25))
    job = JobFactory(retries=5)  # the job's own retries are for failures, not losses
    for attempt in range(1, earlier_lost + 1):
        running(runner, attempt=attempt, job=job, state=Execution.LOST)
    execution = running(runner, attempt=earlier_lost + 1, job=job)

    assert lifecycle.no_retry_if_lost(execution) == why
    said = run_liveness(execution, NOW).text
    assert said.endswith("it will be retried" if why is None else f"it will not be retried: {why}")

    reaped_at = NOW + timedelta(seconds=30)
    assert loop_steps.reap_expired_leases(reaped_at) == 1
    retried = job.executions.filter(attempt=earlier_lost + 2).exists()
    assert retried == (why is None)


def test_a_run_whose_cancel_was_requested_is_not_retried(db, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    execution = running(RunnerFactory(last_seen_at=ago(25)), cancel_requested_at=ago(5))
    assert run_liveness(execution, NOW).text.endswith(
        "it will not be retried: its cancel was requested"
    )
    loop_steps.reap_expired_leases(NOW + timedelta(seconds=30))
    assert not Execution.objects.filter(attempt=2).exists()


def test_the_attempts_of_another_runner_do_not_count_for_a_pinned_run(db, settings):
    settings.CRONIQ_LOST_RETRIES = 1
    web1, web2 = RunnerFactory(name="web-1"), RunnerFactory(name="web-2")
    job = JobFactory()
    running(web2, job=job, pinned_to="web-2", state=Execution.LOST)
    execution = running(web1, job=job, pinned_to="web-1")
    assert lifecycle.no_retry_if_lost(execution) is None
