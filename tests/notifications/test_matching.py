"""Which rules an event matches: every filter, the thresholds, fallback."""

import pytest

from calendars.models import Calendar
from notifications import matching
from notifications.models import Rule
from notifications.recording import record_event
from tests.factories import JobFactory, RunnerFactory

from .conftest import T0, failure, make_channel, make_rule

pytestmark = pytest.mark.django_db


def rule(events=("execution.failed",), **fields):
    return Rule(name="r", events=list(events), **fields)


def test_it_matches_only_the_rules_event_names(job):
    event = failure(job=job)
    assert matching.matches(rule(["execution.failed", "job.failing"]), event)
    assert not matching.matches(rule(["execution.given_up"]), event)


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        ("billing-*", True),
        ("billing-sync", True),
        ("*-sync", True),
        ("report-*", False),
        ("", True),
    ],
)
def test_the_jobs_glob_is_matched_against_the_job_name(job, glob, expected):
    assert matching.matches(rule(jobs=glob), failure(job=job)) is expected


def test_a_rule_with_a_jobs_glob_never_matches_an_event_without_a_job():
    runner = RunnerFactory(name="build-3")
    event = record_event("runner.offline", at=T0, runner=runner, data={"labels": []})
    assert matching.matches(rule(["runner.offline"]), event)
    assert not matching.matches(rule(["runner.offline"], jobs="*"), event)


def test_rule_labels_must_all_be_carried_by_the_job(job):
    event = failure(job=job)
    assert matching.matches(rule(labels=["db"]), event)
    assert matching.matches(rule(labels=["db", "linux"]), event)
    assert not matching.matches(rule(labels=["db", "gpu"]), event)


def test_runner_events_are_filtered_by_the_runners_labels():
    gpu = RunnerFactory(name="gpu-1", labels=["gpu", "linux"])
    offline = record_event(
        "runner.offline", at=T0, runner=gpu, data={"labels": ["gpu", "linux"], "last_seen_at": ""}
    )
    # runner.flapping carries no labels: the runner row has them.
    flapping = record_event("runner.flapping", at=T0, runner=gpu, data={"takeovers": 5})
    for event in (offline, flapping):
        assert matching.matches(rule([event.name], labels=["gpu"]), event)
        assert not matching.matches(rule([event.name], labels=["db"]), event)


def test_labels_unserved_is_filtered_by_the_labels_nobody_serves():
    event = record_event("labels.unserved", at=T0, data={"labels": ["gpu"], "grace": 300.0})
    assert matching.matches(rule(["labels.unserved"], labels=["gpu"]), event)
    assert not matching.matches(rule(["labels.unserved"], labels=["db"]), event)


def test_a_calendar_filter_matches_the_jobs_calendar():
    payroll = Calendar.objects.create(name="payroll", timezone="UTC")
    other = Calendar.objects.create(name="other", timezone="UTC")
    on_payroll = failure(job=JobFactory(calendar=payroll))
    without = failure(job=JobFactory())
    assert matching.matches(rule(calendar=payroll), on_payroll)
    assert not matching.matches(rule(calendar=other), on_payroll)
    assert not matching.matches(rule(calendar=payroll), without)


def test_an_owner_filter_matches_the_jobs_owner(job):
    event = failure(job=job)
    assert matching.matches(rule(owner="team-a"), event)
    assert not matching.matches(rule(owner="team-b"), event)
    stalled = record_event("scheduler.stalled", at=T0, data={"grace": 60.0})
    assert not matching.matches(rule(["scheduler.stalled"], owner="team-a"), stalled)


def test_job_failing_matches_once_per_streak_at_the_rules_threshold(job):
    rule3 = rule(["job.failing"], failures_in_a_row=3)
    streaks = [failure("job.failing", job=job, data={"streak": n}) for n in range(1, 6)]
    assert [matching.matches(rule3, event) for event in streaks] == [
        False,
        False,
        True,
        False,
        False,
    ]
    assert matching.matches(rule(["job.failing"]), streaks[0])  # default: the first failure


def test_job_slow_matches_the_rules_factor_or_the_default(job, settings):
    settings.CRONIQ_SLOW_FACTOR = 3.0

    def slow(factor):
        return record_event("job.slow", at=T0, job=job, data={"factor": factor, "elapsed": 900.0})

    assert matching.matches(rule(["job.slow"]), slow(3.0))
    assert not matching.matches(rule(["job.slow"]), slow(5.0))
    assert matching.matches(rule(["job.slow"], slow_factor=5.0), slow(5.0))
    assert not matching.matches(rule(["job.slow"], slow_factor=5.0), slow(3.0))
    # Past the job's own max_duration: no factor, every rule.
    fixed = record_event(
        "job.slow", at=T0, job=job, data={"max_duration": 600, "elapsed": 601.0, "factor": None}
    )
    assert matching.matches(rule(["job.slow"], slow_factor=5.0), fixed)


@pytest.mark.parametrize(
    ("name", "setting"),
    [
        ("job.missed", "CRONIQ_MISSED_GRACE"),
        ("labels.unserved", "CRONIQ_UNSERVED_GRACE"),
        ("scheduler.stalled", "CRONIQ_STALL_GRACE"),
    ],
)
def test_grace_events_match_the_rules_grace_or_the_setting(job, settings, name, setting):
    setattr(settings, setting, 120.0)

    def late(grace):
        return record_event(name, at=T0, job=job, data={"grace": grace, "labels": []})

    assert matching.matches(rule([name]), late(120.0))
    assert not matching.matches(rule([name]), late(600.0))
    assert matching.matches(rule([name], grace=600), late(600.0))
    assert not matching.matches(rule([name], grace=600), late(120.0))


def routed_to(event):
    return sorted((r.name, c.name) for r, c in matching.routes(event, matching.enabled_rules()))


def test_a_fallback_rule_takes_only_what_no_other_rule_matched(job):
    ops, team = make_channel("ops"), make_channel("team-a")
    make_rule("catch-all", ["execution.failed"], [ops], fallback=True)
    make_rule("team-a", ["execution.failed"], [team], owner="team-a")
    assert routed_to(failure(job=job)) == [("team-a", "team-a")]
    assert routed_to(failure(job=JobFactory(owner="team-b"))) == [("catch-all", "ops")]


def test_disabled_rules_and_channels_route_nothing_and_the_fallback_steps_in(job):
    ops, team, spare = make_channel("ops"), make_channel("team-a"), make_channel("spare")
    make_rule("catch-all", ["execution.failed"], [ops], fallback=True)
    team_rule = make_rule("team-a", ["execution.failed"], [team, spare], owner="team-a")
    spare.enabled = False
    spare.save()
    assert routed_to(failure(job=job)) == [("team-a", "team-a")]

    team.enabled = False
    team.save()
    # The team's rule reaches no channel now: the fallback takes its alerts.
    assert routed_to(failure(job=job)) == [("catch-all", "ops")]

    team.enabled = True
    team.save()
    team_rule.enabled = False
    team_rule.save()
    assert routed_to(failure(job=job)) == [("catch-all", "ops")]
