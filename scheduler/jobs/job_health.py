"""Each job's running record: its failure streak, last outcomes and run counts.

Written in the transaction that settles an execution (`scheduler.runs.outcomes`),
so the streak that `job.failing` and `job.recovered` report and the
per-job series on `/metrics` never disagree with the executions. A row of its
own, not fields of Job: a finishing runner never waits on the job row the
loop locks to fire it, and an operator's save of the job cannot write back a
stale count.
"""

from django.db import models


class JobHealth(models.Model):
    # Run counts by final state: croniq_job_runs_total{job,state}.
    COUNTED_STATES = ("succeeded", "failed", "timed_out", "lost", "cancelled", "skipped")

    job = models.OneToOneField(
        "scheduler.Job", primary_key=True, on_delete=models.CASCADE, related_name="health"
    )
    failure_streak = models.PositiveIntegerField(
        default=0, help_text="Runs in a row that failed for good (after their retries)."
    )
    failing_since = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    last_state = models.CharField(max_length=10, blank=True)
    succeeded = models.PositiveBigIntegerField(default=0)
    failed = models.PositiveBigIntegerField(default=0)
    timed_out = models.PositiveBigIntegerField(default=0)
    lost = models.PositiveBigIntegerField(default=0)
    cancelled = models.PositiveBigIntegerField(default=0)
    skipped = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "job health"

    def __str__(self) -> str:
        return f"{self.job_id}: streak {self.failure_streak}"

    def runs(self) -> dict[str, int]:
        """{state: count} of the counted final states."""
        return {state: getattr(self, state) for state in self.COUNTED_STATES}
