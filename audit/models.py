from typing import Any

from django.db import models

from core.instants import shown


class AuditEvent(models.Model):
    """One repair, operator action or rejection: invariant 4, "no silent repair"."""

    USER = "user"
    RUNNER = "runner"
    SYSTEM = "system"
    API_KEY = "api_key"
    ACTOR_KINDS = [(USER, "user"), (RUNNER, "runner"), (SYSTEM, "system"), (API_KEY, "API key")]

    at = models.DateTimeField(verbose_name="at")
    actor_kind = models.CharField(max_length=10, choices=ACTOR_KINDS, default=SYSTEM)
    actor_name = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=64, help_text="What happened, e.g. runner.takeover.")
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=300, blank=True)
    data = models.JSONField(default=dict, blank=True)
    # The project of the row it is about, as it was then (audit.recording):
    # a key bound to a project reads only its project's events, those of
    # rows deleted or moved since included. Empty: about nothing of a
    # project (a runner, maintenance, a global key), or written before
    # projects.
    project = models.CharField(max_length=100, blank=True, default="", db_default="")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # The audit page and retention pruning read newest-first / oldest-first by time.
            models.Index(fields=["at"], name="audit_at"),
            # Filters by action (flapping detection counts recent runner.takeover events).
            models.Index(fields=["action", "at"], name="audit_action_at"),
            # The admin's actor kind filter: operator actions are rare among
            # system events, so finding them must not scan the table.
            models.Index(fields=["actor_kind", "at"], name="audit_actor_at"),
            # "History of this object" on job, runner and execution pages.
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
            # A project's events, newest first (the API as a key bound to
            # it); only events of a project are indexed.
            models.Index(
                fields=["project", "id"],
                name="audit_project_id",
                condition=~models.Q(project=""),
            ),
        ]

    def __str__(self):
        return f"{shown(self.at)} {self.action} {self.target_repr}"


class CounterQuerySet(models.QuerySet):
    def totals(self) -> list[tuple[str, str, Any]]:
        """(name, labels, value) per series, its shards summed."""
        series = self.values("name", "labels").annotate(total=models.Sum("value")).order_by()
        return [(row["name"], row["labels"], row["total"]) for row in series]

    def value_of(self, name: str, labels: str = "") -> int:
        """The value of one series (0 when it was never incremented)."""
        found = self.filter(name=name, labels=labels).aggregate(total=models.Sum("value"))
        return found["total"] or 0


class Counter(models.Model):
    """A monotonically increasing count, persisted so /metrics is right across
    processes and restarts (the web and the loop are separate processes).

    A series is split over a few rows (`shard`, one per database thread):
    every finish moves `croniq_executions_total`, and on a single row the
    concurrent finishes queued for its lock through each other's commits.
    Readers sum the shards.
    """

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=300, blank=True, help_text="Canonical k=v,k=v form.")
    shard = models.PositiveSmallIntegerField(default=0)
    value = models.BigIntegerField(default=0)

    objects = CounterQuerySet.as_manager()

    class Meta:
        constraints = [
            # One row per series and shard; increments are UPDATEs of it.
            models.UniqueConstraint(
                fields=["name", "labels", "shard"], name="counter_series_shard_unique"
            ),
        ]

    def __str__(self):
        return f"{self.name}{{{self.labels}}} {self.value}"

    def label_dict(self) -> dict[str, str]:
        if not self.labels:
            return {}
        return dict(pair.split("=", 1) for pair in self.labels.split(","))


class Heartbeat(models.Model):
    """The last time a periodic process did its work, e.g. the scheduler tick.

    `/metrics` exports it so an alert fires when the loop stops; the web and
    the loop are separate processes, so the time lives in the database.
    """

    name = models.CharField(max_length=100, unique=True)
    at = models.DateTimeField()

    def __str__(self):
        return f"{self.name} {self.at:%Y-%m-%d %H:%M:%S}"
