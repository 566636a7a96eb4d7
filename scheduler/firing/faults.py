"""What the fire step and the timeouts step blame on a job rather than on the
database, and the quarantine that takes a job that cannot fire out of the
schedule."""

from datetime import datetime

from django.db import DatabaseError, DataError, IntegrityError, transaction

import audit
from scheduler.models import Job

# Characters of a quarantined job's error kept on the job (the audit keeps all).
QUARANTINE_REASON_CHARS = 2000


JOB_ERRORS = "croniq_job_errors_total"


def job_fault(error: BaseException) -> bool:
    """Whether `error` is about the job's own rows or values (quarantine it)
    rather than about the database (lost connection, lock timeout, schema:
    the loop backs off and retries, no job is blamed)."""
    if isinstance(error, DatabaseError):
        return isinstance(error, (IntegrityError, DataError))
    return isinstance(error, Exception)


def quarantine(job_id: int, reason: str, now: datetime) -> bool:
    """Take a job that cannot be fired out of the schedule, with the reason.

    Saving it in the admin or resuming it clears the error. Nothing else is
    read or written for healthy jobs: a quarantined job only leaves the
    `job_due` index through its NULL next_run_at.
    """
    with transaction.atomic():
        job = Job.objects.filter(pk=job_id).first()
        if job is None:
            return False
        Job.objects.filter(pk=job_id).update(
            error=reason[:QUARANTINE_REASON_CHARS], error_at=now, next_run_at=None
        )
        audit.record(
            "job.error",
            target=job,
            at=now,
            data={"error": reason, "next_run_at": iso(job.next_run_at)},
            counter=(JOB_ERRORS, {"job": job.name}),
        )
    return True


def iso(instant: datetime | None) -> str | None:
    return instant.isoformat() if instant else None
