import asyncio
import datetime as dt
import threading

import pytest
from django.db import connection
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from audit.models import AuditEvent, Counter
from croniq_project.collector import CroniqCollector
from dispatch import claims, identity, latency, polls, refusals
from dispatch import leases as dispatch
from dispatch.hub import Waiter
from runners.models import Runner, RunnerToken
from scheduler.models import LOG_TRUNCATED_MARKER, Execution, LogChunk
from tests.factories import JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending

LATER = NOW + dt.timedelta(seconds=5)


@pytest.fixture
def runner(token):
    return RunnerFactory(token=token, labels=["linux"], session="s1", capacity=2)


def claim(runner, capacity=1, now=NOW):
    return claims.claim(runner, runner.session, capacity, now)


def test_claim_takes_the_oldest_ready_executions_up_to_capacity(runner):
    newest = pending(now=NOW - dt.timedelta(seconds=1))
    oldest = pending(now=NOW - dt.timedelta(seconds=3))
    middle = pending(now=NOW - dt.timedelta(seconds=2))
    assert [e.pk for e in claim(runner, capacity=2)] == [oldest.pk, middle.pk]
    assert [e.pk for e in claim(runner, capacity=2)] == [newest.pk]
    assert claim(runner, capacity=2) == []


def test_claim_leaves_executions_whose_run_after_is_still_ahead(runner):
    pending(now=NOW + dt.timedelta(seconds=1))
    assert claim(runner) == []
    assert len(claim(runner, now=NOW + dt.timedelta(seconds=1))) == 1


def test_claim_marks_the_execution_running_under_a_new_lease(runner, settings):
    settings.CRONIQ_LEASE_TTL = 30
    execution = pending(now=NOW - dt.timedelta(seconds=2))
    [claimed] = claim(runner)
    execution.refresh_from_db()
    assert execution.state == Execution.RUNNING
    assert execution.runner == runner
    assert execution.session == "s1"
    assert execution.lease == 1
    assert execution.claimed_at == NOW
    assert execution.lease_expires_at == NOW + dt.timedelta(seconds=30)
    assert claimed.lease == 1

    # Back to pending (the reaper's path): the next claim gets a newer lease.
    Execution.objects.filter(pk=execution.pk).update(state=Execution.PENDING)
    [again] = claim(runner, now=LATER)
    assert again.lease == 2


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_dispatch_latency_runs_to_the_moment_the_answer_leaves_not_to_the_claim(runner, loop):
    """Work claimed ahead of its instant, whose answer leaves 300 ms after
    the instant, waited 0.3 s: the sample is taken at the hand-over."""
    execution = pending(now=NOW)
    claimed = claim(runner, now=NOW - dt.timedelta(milliseconds=100))
    assert claimed == []  # not ready yet: a poll's own claim never takes it early
    served = claims.serve_waiters(
        [waiter_for(runner, loop)], NOW - dt.timedelta(milliseconds=100), NOW
    )
    [(_, handed)] = served
    assert [a["id"] for a in handed.assignments] == [execution.pk]
    assert handed.not_before == NOW  # claimed ahead, held until its instant

    waits = latency.latencies(handed, NOW + dt.timedelta(milliseconds=300))
    assert waits == [pytest.approx(0.3)]
    latency.record_latency(waits)

    assert Counter.objects.value_of("croniq_dispatch_latency_seconds__count") == 1
    assert Counter.objects.value_of("croniq_dispatch_latency_seconds__sum_us") == 300_000
    bucket = Counter.objects.get(name="croniq_dispatch_latency_seconds__bucket")
    assert (bucket.labels, bucket.value) == ("le=0.5", 1)
    values = scrape()
    assert values["croniq_dispatch_latency_seconds_sum"] > 0.25
    assert values["croniq_dispatch_latency_seconds_count"] == 1


def test_claiming_records_no_latency_sample_before_the_answer_leaves(runner):
    pending(now=NOW - dt.timedelta(milliseconds=30))
    assert len(claim(runner)) == 1
    assert not Counter.objects.filter(name__startswith="croniq_dispatch_latency").exists()


def waiter_for(runner, loop):
    return Waiter(loop, runner.pk, runner.token, runner.session, None)


def scrape():
    """{sample name: value} of the dispatch latency histogram on /metrics."""
    registry = CollectorRegistry()
    registry.register(CroniqCollector())
    text = generate_latest(registry).decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("croniq_dispatch_latency_seconds") and "le" not in sample.labels
    }


@pytest.mark.parametrize(
    ("job_labels", "runner_labels", "matches"),
    [
        ([], [], True),
        ([], ["linux"], True),
        (["linux"], ["linux"], True),
        (["linux"], ["gpu", "linux"], True),
        (["gpu", "linux"], ["linux"], False),
        (["windows"], ["linux"], False),
        (["linux"], [], False),
    ],
)
def test_a_job_runs_only_where_all_its_labels_are(token, job_labels, runner_labels, matches):
    runner = RunnerFactory(token=token, labels=runner_labels)
    pending(labels=job_labels)
    assert bool(claim(runner)) is matches


def test_a_runner_skips_jobs_it_cannot_run_and_takes_later_ones(token):
    runner = RunnerFactory(token=token, labels=["linux"])
    pending(now=NOW - dt.timedelta(seconds=2), labels=["gpu"])
    fits = pending(now=NOW - dt.timedelta(seconds=1), labels=["linux"])
    assert [e.pk for e in claim(runner)] == [fits.pk]


def test_a_draining_runner_gets_nothing(runner):
    pending()
    identity.drain(runner, NOW)
    assert claim(runner) == []


def test_a_cancelled_pending_execution_is_not_handed_out(runner):
    pending(cancel_requested_at=NOW)
    assert claim(runner) == []


def poll(secret, runner, session="s1", capacity=None, now=LATER):
    credential = identity.Credential(secret)
    return polls.first_poll(credential, runner.pk, session, capacity, now)[1:]


def test_a_poll_counts_as_a_heartbeat_and_brings_an_offline_runner_back(runner, secret):
    Runner.objects.filter(pk=runner.pk).update(state=Runner.OFFLINE)
    pending(labels=["linux"])
    found, handed = poll(secret, runner)
    found.refresh_from_db()
    assert found.last_seen_at == LATER
    assert found.state == Runner.ONLINE
    assert len(handed.assignments) == 1  # capacity defaults to the runner's (2), one is ready


def test_a_poll_refuses_a_superseded_session(runner, secret):
    pending()
    with pytest.raises(refusals.Conflict):
        poll(secret, runner, session="old-session", capacity=1, now=NOW)
    assert Execution.objects.get().state == Execution.PENDING


def test_the_assignment_carries_what_the_runner_needs(runner):
    job = JobFactory(name="report", command="echo hi", env={"A": "1"}, timeout=60, max_output=4096)
    execution = pending(job=job, attempt=2)
    [claimed] = claim(runner)
    assert claims.assignment(claimed) == {
        "id": execution.pk,
        "job": "report",
        "command": "echo hi",
        "env": {"A": "1"},
        "timeout": 60,
        "scheduled_for": NOW,
        "attempt": 2,
        "lease": 1,
        "lease_expires_at": claimed.lease_expires_at,
        "trigger": "schedule",
        "traceparent": execution.traceparent,
        "max_output": 4096,
    }


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_hand_out_the_same_execution_twice():
    token, _ = RunnerToken.issue("t")
    runners = [RunnerFactory(token=token, session=f"s{n}") for n in range(8)]
    for _ in range(60):
        pending()
    got = []

    def work(runner):
        try:
            while found := claims.claim(runner, runner.session, 3, LATER):
                got.extend(e.pk for e in found)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 60
    assert len(set(got)) == 60
    assert Execution.objects.filter(state=Execution.RUNNING, lease=1).count() == 60


# -- handing back ------------------------------------------------------------


def assignments(runner, capacity=1, now=NOW):
    return claims.answer(runner, claim(runner, capacity, now), now).assignments


def test_work_whose_answer_never_left_goes_back_pending_the_same_attempt(runner):
    execution = pending(now=NOW - dt.timedelta(seconds=1))
    handed = assignments(runner)

    assert dispatch.hand_back(runner.pk, "s1", handed, LATER) == [execution.pk]

    execution.refresh_from_db()
    assert execution.state == Execution.PENDING
    assert (execution.runner, execution.session) == (None, "")
    assert (execution.lease_expires_at, execution.claimed_at) == (None, None)
    assert execution.attempt == 1
    assert execution.lease == 1  # the next claim's lease is newer still
    event = AuditEvent.objects.get(action="execution.handed_back")
    assert event.target_id == str(execution.pk)
    assert event.data == {"runner_id": runner.pk, "session": "s1", "lease": 1}
    assert Counter.objects.value_of("croniq_executions_handed_back_total") == 1
    [again] = claim(runner, now=LATER)
    assert (again.pk, again.lease, again.attempt) == (execution.pk, 2, 1)


def test_handing_back_leaves_work_held_under_another_lease_or_finished(runner, token):
    execution, finished = pending(), pending()
    handed = assignments(runner, capacity=2)
    # Since the claim: the first went back and was claimed again (a newer
    # lease), the second was settled.
    Execution.objects.filter(pk=execution.pk).update(lease=5)
    Execution.objects.filter(pk=finished.pk).update(state=Execution.SUCCEEDED)
    other = RunnerFactory(token=token, name="other", labels=["linux"], session="s9")

    assert dispatch.hand_back(other.pk, "s9", handed, LATER) == []  # not its work
    assert dispatch.hand_back(runner.pk, "s1", handed, LATER) == []
    assert list(Execution.objects.order_by("pk").values_list("state", "runner", "lease")) == [
        (Execution.RUNNING, runner.pk, 5),
        (Execution.SUCCEEDED, runner.pk, 1),
    ]
    assert not AuditEvent.objects.filter(action="execution.handed_back").exists()


# -- heartbeat -------------------------------------------------------------


def beat(secret, runner, held, session="s1"):
    return dispatch.heartbeat(identity.Credential(secret), runner.pk, session, held, LATER)


def test_heartbeat_renews_what_is_held_and_reports_lost_and_cancelled(runner, secret, settings):
    settings.CRONIQ_LEASE_TTL = 30
    first, second, foreign = pending(), pending(), pending()
    claim(runner, capacity=2)
    Execution.objects.filter(pk=second.pk).update(cancel_requested_at=NOW)
    held = [(first.pk, 1), (second.pk, 1), (foreign.pk, 1), (first.pk, 1), (2**80, 1)]

    answer = beat(secret, runner, held, session="s1")

    assert answer["renewed"] == [first.pk, second.pk]
    assert answer["lost"] == [foreign.pk, 2**80]
    assert answer["cancel"] == [second.pk]
    assert answer["lease_expires_at"] == LATER + dt.timedelta(seconds=30)
    first.refresh_from_db()
    assert first.lease_expires_at == LATER + dt.timedelta(seconds=30)


def test_heartbeat_with_a_stale_lease_renews_nothing(runner, secret):
    execution = pending()
    claim(runner)
    answer = beat(secret, runner, [(execution.pk, 7)], session="s1")
    assert answer["renewed"] == []
    assert answer["lost"] == [execution.pk]
    execution.refresh_from_db()
    assert execution.lease_expires_at == NOW + dt.timedelta(seconds=30)


def test_heartbeat_from_a_superseded_session_is_refused(runner, secret):
    with pytest.raises(refusals.Conflict):
        beat(secret, runner, [], session="old")


# -- logs ------------------------------------------------------------------


@pytest.fixture
def held(runner):
    execution = pending()
    claim(runner)
    execution.refresh_from_db()
    return execution


def append(token, held, seq, data, lease=None, session="s1"):
    lease = held.lease if lease is None else lease
    return dispatch.append_log(token, held.pk, session, lease, seq, data, LATER)


def test_a_retried_log_chunk_is_stored_once(token, held):
    assert append(token, held, 0, "one\n") is True
    assert append(token, held, 0, "one\n") is False
    assert append(token, held, 1, "two\n") is True
    assert list(held.log_chunks.values_list("seq", "data")) == [(0, "one\n"), (1, "two\n")]
    held.refresh_from_db()
    assert held.log_size == 8


def test_a_chunk_above_64_kib_is_refused(token, held, settings):
    assert settings.CRONIQ_LOG_CHUNK_LIMIT == 64 * 1024
    with pytest.raises(refusals.TooLarge):
        append(token, held, 0, "€" * 21846)  # 65,538 bytes in UTF-8, 21,846 characters
    append(token, held, 0, "x" * 64 * 1024)
    assert LogChunk.objects.count() == 1


def test_the_per_execution_cap_truncates_with_a_marker_on_a_character_boundary(
    token, held, settings
):
    settings.CRONIQ_LOG_LIMIT = 1024
    append(token, held, 0, "a" * 1023)
    append(token, held, 1, "é" * 10)  # only one byte of room: "é" does not fit
    append(token, held, 2, "more")
    held.refresh_from_db()
    assert held.log_truncated is True
    assert held.log_size == 1023
    assert list(held.log_chunks.values_list("seq", "data")) == [
        (0, "a" * 1023),
        (1, LOG_TRUNCATED_MARKER.format(limit=1024)),
    ]


def test_log_text_the_database_cannot_store_is_replaced(token, held):
    append(token, held, 0, "nul\x00 and a lone \ud800 surrogate")
    stored = LogChunk.objects.get().data
    assert "\x00" not in stored
    assert stored.startswith("nul\ufffd and a lone ")


@pytest.mark.parametrize(
    "stale",
    [
        {"lease": 2},
        {"session": "someone-else"},
    ],
)
def test_a_log_under_a_stale_lease_is_refused_audited_and_counted(token, held, stale):
    with pytest.raises(refusals.Conflict):
        append(token, held, 0, "late", **stale)
    assert LogChunk.objects.count() == 0
    event = AuditEvent.objects.get(action="execution.fencing_rejected")
    assert event.data["call"] == "logs"
    assert Counter.objects.value_of("croniq_fencing_rejections_total") == 1


def test_another_tokens_runner_cannot_write_to_an_execution(held):
    other, _ = RunnerToken.issue("other")
    with pytest.raises(refusals.Conflict):
        append(other, held, 0, "x")


def test_logs_for_an_unknown_execution_are_404(token):
    with pytest.raises(refusals.NotFound):
        dispatch.append_log(token, 424242, "s1", 1, 0, "x", NOW)


# -- finish ----------------------------------------------------------------


def finish(secret, held, exit_code=0, error="", timed_out=False, lease=None, session="s1"):
    lease = held.lease if lease is None else lease
    credential = identity.Credential(secret)
    return dispatch.finish(credential, held.pk, session, lease, exit_code, error, timed_out, LATER)


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "state"),
    [
        (0, False, Execution.SUCCEEDED),
        (2, False, Execution.FAILED),
        (None, False, Execution.FAILED),
        (None, True, Execution.TIMED_OUT),
        (0, True, Execution.TIMED_OUT),
    ],
)
def test_finish_settles_by_exit_code_and_timeout(secret, held, exit_code, timed_out, state):
    assert finish(secret, held, exit_code, "err", timed_out) == state
    held.refresh_from_db()
    assert held.state == state
    assert held.exit_code == exit_code
    assert held.finished_at == LATER
    assert held.error == "err"


def test_a_run_the_operator_cancelled_finishes_cancelled(secret, held):
    Execution.objects.filter(pk=held.pk).update(cancel_requested_at=NOW)
    held.refresh_from_db()
    assert finish(secret, held, exit_code=None) == Execution.CANCELLED


def test_a_retried_finish_gets_the_same_answer(secret, held):
    assert finish(secret, held, 1) == Execution.FAILED
    assert finish(secret, held, 1) == Execution.FAILED
    with pytest.raises(refusals.Conflict):
        finish(secret, held, 0)  # a different outcome is not a retry


def test_a_finish_after_a_takeover_is_refused_and_changes_nothing(token, secret, held):
    identity.register(token, held.runner.name, "s2", LATER)
    held.refresh_from_db()
    assert held.state == Execution.LOST
    with pytest.raises(refusals.Conflict):
        finish(secret, held, 0)
    held.refresh_from_db()
    assert held.state == Execution.LOST
    assert held.exit_code is None
    assert AuditEvent.objects.filter(action="execution.fencing_rejected").count() == 1


FENCED = "killed by the runner: its lease could not be renewed (server unreachable)"


def lapse(held):
    """The lease ran out before LATER, and no loop has reaped the run yet."""
    Execution.objects.filter(pk=held.pk).update(lease_expires_at=LATER - dt.timedelta(seconds=1))
    held.refresh_from_db()


def test_a_kill_reported_after_the_lease_ran_out_is_settled_lost_and_retried(secret, held):
    # The runner fenced the job and reported the kill once the lease had
    # run out, but no loop was reaping then: the report settles it as the
    # reaper would have, so the scheduled instant still runs.
    lapse(held)
    assert finish(secret, held, 143, FENCED) == Execution.LOST
    held.refresh_from_db()
    assert held.state == Execution.LOST
    assert held.lost_reason == "lease_expired"
    retry = Execution.objects.get(job=held.job, attempt=held.attempt + 1)
    assert retry.state == Execution.PENDING
    assert retry.scheduled_for == held.scheduled_for
    event = AuditEvent.objects.get(action="execution.reaped")
    assert event.data["reason"] == "lease_expired"
    assert event.data["retry"] == retry.pk


def test_a_success_reported_after_the_lease_ran_out_is_accepted(secret, held):
    # Nothing else has run the instant: the reaper has not released it.
    lapse(held)
    assert finish(secret, held, 0) == Execution.SUCCEEDED
    assert Execution.objects.filter(job=held.job).count() == 1


def test_a_failure_within_the_lease_is_a_failure(secret, held):
    assert finish(secret, held, 143, FENCED) == Execution.FAILED
    assert not AuditEvent.objects.filter(action="execution.reaped").exists()


def test_a_failed_run_with_retries_left_is_retried_after_its_backoff(secret, runner):
    job = JobFactory(retries=2, retry_backoff=10)
    execution = pending(job=job)
    claim(runner)
    execution.refresh_from_db()
    finish(secret, execution, 1)
    retry = Execution.objects.get(job=job, attempt=2)
    assert retry.state == Execution.PENDING
    assert retry.run_after == LATER + dt.timedelta(seconds=10)


def test_a_lease_renewed_after_the_reaper_looked_is_not_reaped(runner, secret):
    from scheduler.runs import lifecycle

    execution = pending()
    claim(runner)
    expired = Execution.objects.filter(
        state=Execution.RUNNING, lease_expires_at__lt=NOW + dt.timedelta(seconds=31)
    )
    [seen] = list(expired)  # the reaper reads the row: its lease ran out...
    beat(secret, runner, [(execution.pk, 1)], session="s1")  # ...then it is renewed
    assert lifecycle.settle(seen, Execution.LOST, NOW, within=expired) is False
    execution.refresh_from_db()
    assert execution.state == Execution.RUNNING
    assert lifecycle.release(expired, lifecycle.LEASE_EXPIRED, NOW) == []


def test_a_success_is_counted_once(secret, held):
    assert finish(secret, held, 0) == Execution.SUCCEEDED
    assert finish(secret, held, 0) == Execution.SUCCEEDED  # a retried call
    assert Counter.objects.value_of("croniq_executions_total", "state=succeeded") == 1


def test_a_success_reported_under_another_token_changes_nothing(held):
    _, other_secret = RunnerToken.issue("other")
    with pytest.raises(refusals.Conflict):
        finish(other_secret, held, 0)
    held.refresh_from_db()
    assert held.state == Execution.RUNNING
    assert held.exit_code is None


def test_a_success_reported_with_a_revoked_token_is_unauthorized(token, secret, held):
    RunnerToken.objects.filter(pk=token.pk).update(revoked_at=NOW)
    with pytest.raises(refusals.Unauthorized):
        finish(secret, held, 0)
    held.refresh_from_db()
    assert held.state == Execution.RUNNING


@pytest.mark.parametrize("wrong", [{"session": "s2"}, {"lease": 99}])
def test_a_success_under_a_stale_session_or_lease_is_refused(secret, held, wrong):
    with pytest.raises(refusals.Conflict):
        finish(secret, held, 0, **wrong)
    held.refresh_from_db()
    assert held.state == Execution.RUNNING


# -- a singleton timed out on the server -----------------------------------


@pytest.fixture
def timed_out(runner, settings):
    """A singleton run claimed under a long lease, then timed out on the
    server (its runner did not finish in time): (execution, its retry)."""
    from scheduler.firing import ticks

    settings.CRONIQ_LEASE_TTL = 600
    settings.CRONIQ_TIMEOUT_GRACE = 0
    job = JobFactory(singleton=True, timeout=60, retries=1, retry_backoff=0)
    execution = pending(job=job)
    claim(runner)
    assert ticks.expire_timeouts(NOW + dt.timedelta(seconds=61)) == 1
    execution.refresh_from_db()
    retry = job.executions.get(attempt=2)
    assert retry.run_after == execution.lease_expires_at == NOW + dt.timedelta(seconds=600)
    return execution, retry


KILLED_AT = NOW + dt.timedelta(seconds=65)


def confirm(secret, execution, lease=None, session="s1", exit_code=None):
    lease = execution.lease if lease is None else lease
    return dispatch.finish(
        identity.Credential(secret), execution.pk, session, lease, exit_code, "killed", False,
        KILLED_AT,
    )  # fmt: skip


def test_the_runner_confirming_the_kill_releases_the_retry_at_once(secret, runner, timed_out):
    execution, retry = timed_out
    other = RunnerFactory(labels=["linux"], session="s9")
    assert claims.claim(other, "s9", 1, KILLED_AT) == []  # the old process may still run

    assert confirm(secret, execution) == Execution.TIMED_OUT

    retry.refresh_from_db()
    assert retry.run_after == KILLED_AT
    execution.refresh_from_db()
    assert execution.state == Execution.TIMED_OUT  # the report changes nothing else
    assert execution.exit_code is None
    event = AuditEvent.objects.get(action="execution.kill_confirmed")
    assert event.actor_name == runner.name
    assert event.data["retry"] == retry.pk
    assert event.data["instead_of"] == (NOW + dt.timedelta(seconds=600)).isoformat()
    assert [e.pk for e in claims.claim(other, "s9", 1, KILLED_AT)] == [retry.pk]
    # A retried report answers the same and releases nothing more.
    assert confirm(secret, execution) == Execution.TIMED_OUT
    assert AuditEvent.objects.filter(action="execution.kill_confirmed").count() == 1


@pytest.mark.parametrize("wrong", ["lease", "session", "token"])
def test_a_kill_confirmed_under_another_lease_releases_nothing(secret, timed_out, wrong):
    execution, retry = timed_out
    if wrong == "token":
        secret = RunnerToken.issue("another")[1]
    with pytest.raises(identity.Conflict):
        confirm(
            secret,
            execution,
            lease=execution.lease + 1 if wrong == "lease" else None,
            session="s0" if wrong == "session" else "s1",
        )
    retry.refresh_from_db()
    assert retry.run_after == NOW + dt.timedelta(seconds=600)
    assert not AuditEvent.objects.filter(action="execution.kill_confirmed").exists()


def test_a_confirmed_kill_never_shortens_the_retry_backoff(secret, timed_out):
    execution, retry = timed_out
    execution.job.retry_backoff = 100
    execution.job.save()
    assert confirm(secret, execution) == Execution.TIMED_OUT
    retry.refresh_from_db()
    assert retry.run_after == execution.finished_at + dt.timedelta(seconds=100)
