"""Arrange and inspect an end-to-end database through `manage.py shell`.

The agent tests run the server in its own process on its own database, so
they create jobs and read results the way an operator's script would.
"""

import json
import textwrap

from tests.e2e.processes import manage

PRELUDE = """
import json
from datetime import timedelta
from django.utils import timezone
from runners.models import RunnerToken, Runner
from scheduler.models import Job, Execution, LogChunk
now = timezone.now()
def out(value):
    print("RESULT:" + json.dumps(value, default=str))
"""


def django(db, code):
    """Run `code` in the server's Django; returns what it passed to out()."""
    result = manage(db, "shell", "-c", PRELUDE + textwrap.dedent(code))
    for line in result.stdout.splitlines():
        if line.startswith("RESULT:"):
            return json.loads(line[len("RESULT:") :])
    raise AssertionError(f"no result from manage.py shell:\n{result.stdout}\n{result.stderr}")


def issue_token(db, name="agent"):
    return django(db, f"out(RunnerToken.issue({name!r})[1])")


def add_executions(db, *specs):
    """Pending executions due now, one per spec (a dict with job, command and
    optionally labels, singleton, timeout, env); jobs are created as needed.
    Returns their ids, in one manage.py call."""
    defaults = dict(labels=[], singleton=False, timeout=None, env={})
    specs = [{**defaults, **spec} for spec in specs]
    return django(
        db,
        f"""
        ids = []
        for spec in {specs!r}:
            job, _ = Job.objects.update_or_create(
                name=spec.pop("job"), defaults=dict(schedule="0 0 1 1 *", **spec)
            )
            ids.append(Execution.objects.create(
                job=job, scheduled_for=now, singleton=job.singleton, run_after=now, created_at=now
            ).pk)
        out(ids)
        """,
    )


def add_execution(db, job, command, **options):
    [execution_id] = add_executions(db, dict(job=job, command=command, **options))
    return execution_id


def executions(db, *jobs):
    """Every execution of `jobs`, oldest first, with its log joined in seq order."""
    return django(
        db,
        f"""
        rows = []
        for e in Execution.objects.filter(job__name__in={list(jobs)!r}).order_by("pk"):
            log = "".join(e.log_chunks.order_by("seq").values_list("data", flat=True))
            seqs = list(e.log_chunks.order_by("seq").values_list("seq", flat=True))
            rows.append(dict(
                id=e.pk, job=e.job.name, state=e.state, attempt=e.attempt,
                exit_code=e.exit_code, error=e.error, lease=e.lease,
                lost_reason=e.lost_reason,
                lease_expires_at=e.lease_expires_at.timestamp() if e.lease_expires_at else None,
                claimed_at=e.claimed_at.timestamp() if e.claimed_at else None,
                finished_at=e.finished_at.timestamp() if e.finished_at else None,
                log=log, seqs=seqs,
            ))
        out(rows)
        """,
    )


def request_cancel(db, execution_id):
    """What the admin's cancel action does to a running execution."""
    return django(
        db,
        f"out(Execution.objects.filter(pk={execution_id}, state='running')"
        ".update(cancel_requested_at=now))",
    )
