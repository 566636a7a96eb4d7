"""Secrets reach only the assignment of the runner that claimed the run
(docs/design.md §11): resolved at claim, with the values to redact; never
in the job's or the execution's row; a run whose secret is gone fails at
claim, unstarted; every read counted per project."""

import asyncio
import datetime as dt

import pytest
from cryptography.fernet import Fernet

from audit.models import Counter
from dispatch import claims
from dispatch.hub import Waiter
from scheduler.models import Execution, Job
from tests.factories import JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending
from vault import store

pytestmark = pytest.mark.django_db

VALUE = "correct-horse-battery"


@pytest.fixture
def runner(token):
    return RunnerFactory(token=token, labels=["linux"], session="s1", capacity=5)


def put(name="db-password", value=VALUE):
    store.put(name, value, actor=None, now=NOW)


def handed(runner):
    executions = claims.claim(runner, runner.session, 5, NOW)
    return claims.answer(runner, executions, NOW)


def reads():
    return sum(
        c.value
        for c in Counter.objects.filter(name="croniq_secret_reads_total", labels="project=default")
    )


def test_the_assignment_carries_the_value_and_the_values_to_redact(runner):
    put()
    put("short", "abc")
    job = JobFactory(
        env={"DB_PASSWORD": "${secret:db-password}", "DSN": "pg://u:${secret:short}@h", "A": "1"}
    )
    execution = pending(job=job)
    [given] = handed(runner).assignments
    assert given["env"] == {"DB_PASSWORD": VALUE, "DSN": "pg://u:abc@h", "A": "1"}
    # Values under 4 characters are not masked (they would blank ordinary words).
    assert given["redact"] == [VALUE]
    # The rows keep the reference.
    assert Job.objects.get(pk=job.pk).env["DB_PASSWORD"] == "${secret:db-password}"
    execution.refresh_from_db()
    assert VALUE not in str(execution.env)
    assert reads() == 2


def test_an_assignment_without_references_is_as_it_was(runner):
    pending(job=JobFactory(env={"A": "1"}))
    [given] = handed(runner).assignments
    assert "redact" not in given
    assert given["env"] == {"A": "1"}
    assert reads() == 0


def test_a_trigger_override_is_never_resolved(runner):
    put()
    job = JobFactory(env={"DB_PASSWORD": "${secret:db-password}"}, parameters=["EXTRA"])
    pending(job=job, env={"EXTRA": "${secret:db-password}"})
    [given] = handed(runner).assignments
    assert given["env"] == {"DB_PASSWORD": VALUE, "EXTRA": "${secret:db-password}"}


def test_a_run_whose_secret_is_gone_fails_at_claim_unstarted(runner):
    put()
    job = JobFactory(env={"DB_PASSWORD": "${secret:db-password}"})
    store.delete(store.Secret.objects.get(), actor=None, now=NOW)
    doomed = pending(job=job)
    fine = pending(job=JobFactory(env={"A": "1"}))
    result = handed(runner)
    assert [a["id"] for a in result.assignments] == [fine.pk]
    doomed.refresh_from_db()
    assert doomed.state == Execution.FAILED
    assert doomed.error == 'not started: env.DB_PASSWORD: secret "db-password" does not exist'
    assert reads() == 0


def test_a_run_whose_secret_no_key_decrypts_fails_naming_it(runner, settings):
    settings.CRONIQ_SECRETS_KEYS = [Fernet.generate_key().decode()]
    put()
    settings.CRONIQ_SECRETS_KEYS = [Fernet.generate_key().decode()]  # the key lost
    settings.SECRET_KEY = "another-secret-key-entirely"
    doomed = pending(job=JobFactory(env={"DB_PASSWORD": "${secret:db-password}"}))
    assert handed(runner).assignments == []
    doomed.refresh_from_db()
    assert doomed.state == Execution.FAILED
    assert "cannot be decrypted" in doomed.error


def test_the_hub_resolves_for_its_waiting_polls_too(runner):
    loop = asyncio.new_event_loop()
    try:
        served = hub_serves(runner, loop)
    finally:
        loop.close()
    [(_, result)] = served
    assert result.assignments[0]["env"]["DB_PASSWORD"] == VALUE
    assert result.assignments[0]["redact"] == [VALUE]


def hub_serves(runner, loop):
    put()
    pending(
        job=JobFactory(env={"DB_PASSWORD": "${secret:db-password}"}),
        now=NOW - dt.timedelta(seconds=1),
    )

    waiter = Waiter(loop, runner.pk, runner.token, runner.session, None)
    return claims.serve_waiters([waiter], NOW, NOW)


def test_a_job_resolves_its_own_projects_secret_never_anothers(runner):
    from projects.models import Project

    Project.objects.create(name="team-a")
    put()  # default's
    store.put("db-password", "team-a-value-99", project="team-a", actor=None, now=NOW)
    theirs = pending(
        job=JobFactory(name="a-job", project="team-a", env={"P": "${secret:db-password}"})
    )
    [given] = handed(runner).assignments
    assert given["env"] == {"P": "team-a-value-99"}  # team-a's, not default's
    assert given["id"] == theirs.pk
    # A job of a project without the secret fails unstarted, not with default's.
    Project.objects.create(name="team-b")
    lone = pending(
        job=JobFactory(name="b-job", project="team-b", env={"P": "${secret:db-password}"})
    )
    assert handed(runner).assignments == []
    lone.refresh_from_db()
    assert lone.state == Execution.FAILED and "db-password" in lone.error
