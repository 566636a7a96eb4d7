"""Dead letters: an attempt that failed, timed out or was lost with no retry
to follow lands with its reason and log tail; operators replay (same
instant, a higher attempt, refused when stale unless forced, at most once)
or discard them, each audited."""

import datetime as dt
import threading

import pytest
from django.db import connection, transaction
from django.test import override_settings

from audit.models import AuditEvent
from dispatch import claims, identity
from dispatch import leases as dispatch
from runners.models import RunnerToken
from scheduler.models import Execution
from scheduler.runs import lifecycle
from scheduler.runs.log_chunks import LogChunk
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import TAIL_BYTES, DeadLetter, log_tail
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 30, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=5)
ACTOR = ("api_key", "ops-bot")


def running(job, scheduled_for=T0, attempt=1):
    return ExecutionFactory(
        job=job, scheduled_for=scheduled_for, attempt=attempt, state=Execution.RUNNING,
        lease=1, claimed_at=scheduled_for,
    )  # fmt: skip


def failed_for_good(job=None, exit_code=1, lines=0):
    """A dead letter: a job without retries whose run exits with `exit_code`."""
    job = job or JobFactory(name="billing-sync", retries=0)
    execution = running(job)
    for seq in range(lines):
        LogChunk.objects.create(execution=execution, seq=seq, data=f"line {seq}\n")
    lifecycle.settle(execution, Execution.FAILED, LATER, exit_code=exit_code, error="boom")
    return DeadLetter.objects.get(execution=execution)


# Landing


def test_a_failed_run_without_retries_lands_with_its_reason_and_last_log_lines():
    dead_letter = failed_for_good(exit_code=3, lines=30)
    assert dead_letter.reason == DeadLetter.FAILED
    assert dead_letter.detail == "exit code 3; boom"
    assert dead_letter.log_tail == "\n".join(f"line {seq}" for seq in range(10, 30))
    assert (dead_letter.landed_at, dead_letter.status) == (LATER, DeadLetter.OPEN)


def test_a_timed_out_run_without_retries_lands():
    execution = running(JobFactory(retries=0))
    lifecycle.settle(execution, Execution.TIMED_OUT, LATER, error="timed out after 60 s")
    assert DeadLetter.objects.get(execution=execution).reason == DeadLetter.TIMED_OUT


@override_settings(CRONIQ_LOST_RETRIES=0)
def test_a_lost_run_that_is_given_up_lands():
    execution = running(JobFactory(retries=0))
    lifecycle.release(Execution.objects.filter(pk=execution.pk), lifecycle.LEASE_EXPIRED, LATER)
    dead_letter = DeadLetter.objects.get(execution=execution)
    assert (dead_letter.reason, dead_letter.detail) == (DeadLetter.LOST, "lease_expired")


@override_settings(CRONIQ_LOST_RETRIES=1)
def test_a_lost_run_that_is_retried_does_not_land():
    execution = running(JobFactory(retries=0))
    lifecycle.release(Execution.objects.filter(pk=execution.pk), lifecycle.LEASE_EXPIRED, LATER)
    assert not DeadLetter.objects.exists()


def test_a_failure_that_will_be_retried_does_not_land_but_its_last_retry_does():
    job = JobFactory(retries=1, retry_backoff=10)
    first = running(job)
    retry = lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    assert retry.attempt == 2
    assert not DeadLetter.objects.exists()
    Execution.objects.filter(pk=retry.pk).update(state=Execution.RUNNING, lease=1)
    retry.refresh_from_db()
    assert lifecycle.settle(retry, Execution.FAILED, LATER, exit_code=1) is None
    assert list(DeadLetter.objects.values_list("execution", flat=True)) == [retry.pk]


def test_a_success_does_not_land():
    execution = running(JobFactory(retries=0))
    lifecycle.settle(execution, Execution.SUCCEEDED, LATER, exit_code=0)
    assert not DeadLetter.objects.exists()


def test_the_log_tail_keeps_at_most_its_bytes():
    execution = ExecutionFactory(job=JobFactory())
    LogChunk.objects.create(execution=execution, seq=0, data="old\n")
    LogChunk.objects.create(execution=execution, seq=1, data="é" * 5000 + "\nlast\n")
    tail = log_tail(execution.pk)
    assert len(tail.encode("utf-8")) <= TAIL_BYTES
    assert tail.endswith("\nlast") and "old" not in tail
    assert log_tail(ExecutionFactory(job=JobFactory()).pk) == ""


# Replay


def test_a_replay_keeps_the_instant_and_raises_the_attempt():
    job = JobFactory(retries=1, retry_backoff=10)
    retry = lifecycle.settle(running(job), Execution.FAILED, LATER, exit_code=1)
    Execution.objects.filter(pk=retry.pk).update(state=Execution.RUNNING, lease=1)
    retry.refresh_from_db()
    lifecycle.settle(retry, Execution.FAILED, LATER, exit_code=1)
    dead_letter = DeadLetter.objects.get()

    replayed_at = LATER + dt.timedelta(hours=1)
    new = dead_letter_actions.replay(dead_letter, replayed_at, ACTOR)

    assert (new.scheduled_for, new.attempt, new.trigger) == (T0, 3, Execution.REPLAY)
    assert (new.state, new.run_after) == (Execution.PENDING, replayed_at)
    dead_letter.refresh_from_db()
    assert dead_letter.status == DeadLetter.REPLAYED
    assert dead_letter.replayed_execution == new
    event = AuditEvent.objects.get(action="deadletter.replay")
    assert (event.actor_kind, event.actor_name) == ACTOR
    assert event.data == {
        "execution": new.pk,
        "previous": retry.pk,
        "attempt": 3,
        "scheduled_for": T0.isoformat(),
        "forced": False,
    }


def test_a_stale_replay_is_refused_without_force_and_changes_nothing():
    dead_letter = failed_for_good()
    eight_days_on = T0 + dt.timedelta(days=8)
    with pytest.raises(OperationRefused, match="stale replay") as refused:
        dead_letter_actions.replay(dead_letter, eight_days_on, ACTOR)
    assert str(refused.value) == (
        f"stale replay: dead letter {dead_letter.pk} is for 2026-06-01 02:30:00 UTC, 8 day(s) "
        "ago, past CRONIQ_REPLAY_MAX_AGE (7 days); replay it with force to run it anyway"
    )
    assert Execution.objects.count() == 1
    assert not AuditEvent.objects.filter(action="deadletter.replay").exists()
    dead_letter.refresh_from_db()
    assert dead_letter.status == DeadLetter.OPEN


def test_a_stale_replay_with_force_runs():
    dead_letter = failed_for_good()
    new = dead_letter_actions.replay(dead_letter, T0 + dt.timedelta(days=8), ACTOR, force=True)
    assert (new.scheduled_for, new.attempt) == (T0, 2)
    assert AuditEvent.objects.get(action="deadletter.replay").data["forced"] is True


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (604800, "7 days"),
        (86400, "1 day"),
        (129600, "36 hours"),
        (120, "2 minutes"),
        (90, "90 seconds"),
    ],
)
def test_the_replay_age_limit_reads_as_people_write_it(seconds, words):
    assert dead_letter_actions.in_words(dt.timedelta(seconds=seconds)) == words


@override_settings(CRONIQ_REPLAY_MAX_AGE=3600)
def test_the_replay_age_limit_is_a_setting():
    dead_letter = failed_for_good()
    assert not dead_letter_actions.is_stale(dead_letter, T0 + dt.timedelta(seconds=3600))
    assert dead_letter_actions.is_stale(dead_letter, T0 + dt.timedelta(seconds=3601))


def test_replaying_twice_creates_one_execution():
    dead_letter = failed_for_good()
    dead_letter_actions.replay(dead_letter, LATER, ACTOR)
    with pytest.raises(OperationRefused, match="replayed already"):
        dead_letter_actions.replay(dead_letter, LATER, ACTOR)
    assert Execution.objects.filter(trigger=Execution.REPLAY).count() == 1


def test_a_replay_read_before_another_replay_is_refused_by_the_database_row():
    dead_letter = failed_for_good()
    same_row_read_earlier = DeadLetter.objects.get(pk=dead_letter.pk)
    dead_letter_actions.replay(dead_letter, LATER, ACTOR)
    with pytest.raises(OperationRefused, match="replayed already"):
        dead_letter_actions.replay(same_row_read_earlier, LATER, ("user", "bob"))
    assert Execution.objects.filter(trigger=Execution.REPLAY).count() == 1
    assert AuditEvent.objects.filter(action="deadletter.replay").count() == 1


def test_a_replay_of_a_singleton_with_a_live_run_is_refused_and_leaves_it_open():
    job = JobFactory(retries=0, singleton=True)
    dead_letter = failed_for_good(job)
    ExecutionFactory(job=job, scheduled_for=LATER, state=Execution.PENDING)
    with pytest.raises(OperationRefused, match="live execution"):
        dead_letter_actions.replay(dead_letter, LATER, ACTOR)
    dead_letter.refresh_from_db()
    assert dead_letter.status == DeadLetter.OPEN


# Discard


def test_discarding_one_closes_it_audited_and_keeps_its_execution():
    dead_letter = failed_for_good()
    rows = DeadLetter.objects.filter(pk=dead_letter.pk)
    assert dead_letter_actions.discard(rows, LATER, ACTOR) == 1
    assert dead_letter_actions.discard(rows, LATER, ACTOR) == 0
    dead_letter.refresh_from_db()
    assert (dead_letter.status, dead_letter.discarded_at) == (DeadLetter.DISCARDED, LATER)
    assert Execution.objects.filter(pk=dead_letter.execution_id).exists()
    event = AuditEvent.objects.get(action="deadletter.discard")
    assert (event.actor_kind, event.actor_name, event.target_id) == (*ACTOR, str(dead_letter.pk))
    with pytest.raises(OperationRefused, match="discarded already"):
        dead_letter_actions.replay(dead_letter, LATER, ACTOR)


def test_discarding_in_bulk_closes_the_open_ones_only():
    letters = [failed_for_good(JobFactory(retries=0)) for _ in range(3)]
    dead_letter_actions.replay(letters[0], LATER, ACTOR)
    assert dead_letter_actions.discard(DeadLetter.objects.all(), LATER, ACTOR) == 2
    statuses = [DeadLetter.objects.get(pk=each.pk).status for each in letters]
    assert statuses == [DeadLetter.REPLAYED, DeadLetter.DISCARDED, DeadLetter.DISCARDED]
    assert AuditEvent.objects.filter(action="deadletter.discard").count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_replays_racing_make_one_execution():
    if not connection.features.has_select_for_update:
        pytest.skip("SQLite serialises writers: no two replays run at once")
    dead_letter = failed_for_good()
    holding, release = threading.Event(), threading.Event()
    outcomes = {}

    def first():
        with transaction.atomic():  # the replay commits only when released
            outcomes["first"] = dead_letter_actions.replay(dead_letter, LATER, ACTOR)
            holding.set()
            release.wait(10)
        connection.close()

    def second(copy):
        try:
            outcomes["second"] = dead_letter_actions.replay(copy, LATER, ("user", "bob"))
        except OperationRefused as refusal:
            outcomes["second"] = refusal
        connection.close()

    read_before = DeadLetter.objects.select_related("execution__job").get(pk=dead_letter.pk)
    threads = [threading.Thread(target=first), threading.Thread(target=second, args=[read_before])]
    threads[0].start()
    assert holding.wait(10)
    threads[1].start()
    release.set()
    for thread in threads:
        thread.join(10)

    assert isinstance(outcomes["second"], OperationRefused)
    assert list(Execution.objects.filter(trigger=Execution.REPLAY)) == [outcomes["first"]]


def test_a_run_its_runner_reports_failed_lands_with_the_log_it_sent():
    token, secret = RunnerToken.issue("dead-letter-runner")
    runner = RunnerFactory(token=token, session="s1", capacity=1)
    ExecutionFactory(job=JobFactory(retries=0), scheduled_for=T0)
    (execution,) = claims.claim(runner, "s1", 1, T0)
    execution.refresh_from_db()
    dispatch.append_log(token, execution.pk, "s1", execution.lease, 0, "disk full\n", T0)
    credential = identity.Credential(secret)
    within_the_lease = T0 + dt.timedelta(seconds=10)
    dispatch.finish(credential, execution.pk, "s1", execution.lease, 4, "", False, within_the_lease)

    dead_letter = DeadLetter.objects.get(execution=execution)
    assert (dead_letter.reason, dead_letter.detail, dead_letter.log_tail) == (
        DeadLetter.FAILED,
        "exit code 4",
        "disk full",
    )
