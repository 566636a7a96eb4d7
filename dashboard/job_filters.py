"""The overview's job filters, kept in the URL (docs/design.md §17):
`?q=` (part of the name), `?tag=`, `?label=`, `?owner=`, `?project=` and
`?state=`, each one value, all of them together; the page passes the
jobs the user sees (`dashboard.seen`), which the filter narrows. The same filter picks the
jobs a bulk action acts on ("all N matching the filter"), read again from
the form the confirmation posts.

Conditions on the jobs table alone, or one semi-join over a partial index
of the executions (running, waiting): a filtered overview costs what the
plain one does at 2,000 jobs."""

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.db.models import Exists, OuterRef, Q, QuerySet

from calendars.validators import text_problem
from core import db
from scheduler.jobs import tags
from scheduler.models import Execution, Job

# ?state=: what a job is doing or how it stands, each a condition on it.
STATES = {
    "active": "active (enabled, not paused, no error)",
    "paused": "paused",
    "disabled": "disabled",
    "error": "out of the schedule with an error",
    "failing": "failing (a failure streak)",
    "running": "running now",
    "waiting": "waiting for a runner",
}
# The longest value a filter takes: a job's name or owner is at most 100
# characters, a label or tag less; a longer one matches nothing anyway.
MAX_VALUE = 200
SUGGESTIONS_CACHE_SECONDS = 60


class FilterError(ValueError):
    """A filter value no job can be matched on, named by its key."""


@dataclass(frozen=True)
class JobFilter:
    q: str = ""
    tag: str = ""
    label: str = ""
    owner: str = ""
    project: str = ""
    state: str = ""

    @classmethod
    def read(cls, params: Any, strict: bool = False) -> "JobFilter":
        """The filter a query string (or a bulk action's form) names. Text
        no database can search for is a FilterError naming its key. An
        unknown state is one too when `strict` (a bulk action must act on
        what the operator saw); a page shows every state instead. `?show=`,
        the state's older name, is read when `state` is not given."""
        values = {}
        for field in fields(cls):
            value = params.get(field.name, "").strip()
            if field.name == "state" and not value and not strict:
                value = params.get("show", "").strip()
            if text_problem(value):
                raise FilterError(f"{field.name}: {text_problem(value)}")
            if len(value) > MAX_VALUE:
                raise FilterError(f"{field.name}: at most {MAX_VALUE} characters")
            values[field.name] = value
        if values["state"] not in STATES:
            if strict and values["state"]:
                raise FilterError(f"state: {values['state']!r} is not one of {', '.join(STATES)}")
            values["state"] = ""
        return cls(**values)

    def items(self) -> list[tuple[str, str]]:
        """[(key, value)] of the filters set, in the URL's order."""
        return [(key, value) for key, value in asdict(self).items() if value]

    def __bool__(self) -> bool:
        return bool(self.items())

    def query(self, **changes: str) -> str:
        """The query string of this filter with `changes` ("" drops a key)."""
        values = {**asdict(self), **changes}
        return urlencode({key: value for key, value in values.items() if value})

    def words(self) -> str:
        """The filter in words, for the bulk action's confirmation."""
        said = {"q": "name contains", "state": "state"}
        return ", ".join(f"{said.get(key, key)} {value!r}" for key, value in self.items())

    def jobs(self, now: datetime, among: QuerySet | None = None) -> QuerySet:
        """The jobs the filter matches among `among` (every job by default:
        a page passes those the user sees)."""
        jobs = Job.objects.all() if among is None else among
        if self.project:
            jobs = jobs.filter(project=self.project)
        if self.q:
            jobs = jobs.filter(name__icontains=self.q)
        if self.tag:
            jobs = tags.carrying(jobs, self.tag)
        if self.label:
            jobs = db.list_holds(jobs, "labels", self.label)
        if self.owner:
            jobs = jobs.filter(owner=self.owner)
        if self.state:
            jobs = jobs.filter(state_condition(self.state, now))
        return jobs


def state_condition(state: str, now: datetime) -> Q:
    """The condition on a job of one of STATES."""
    if state == "active":
        return Q(enabled=True, paused_at__isnull=True, error="")
    if state == "paused":
        return Q(paused_at__isnull=False)
    if state == "disabled":
        return Q(enabled=False)
    if state == "error":
        return ~Q(error="")
    if state == "failing":
        return Q(health__failure_streak__gt=0)
    if state == "running":
        # The running executions, few, through the `exec_running_lease` index.
        return Q(pk__in=Execution.objects.filter(state=Execution.RUNNING).values("job_id"))
    if state == "waiting":
        # Through the `exec_job_pending` partial index, one probe per job.
        return Q(Exists(ready_pending(now).filter(job=OuterRef("pk"))))
    raise ValueError(f"no job state {state!r}")


def ready_pending(now: datetime | None) -> QuerySet:
    """Pending executions a runner could take now (not cancelled meanwhile)."""
    return Execution.objects.filter(
        state=Execution.PENDING, run_after__lte=now, cancel_requested_at__isnull=True
    )


def suggestions(projects: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """The tags, labels and owners the jobs of `projects` (None: every
    project) carry, most used first, for the filter form to suggest: one
    read of those jobs' three fields, kept a minute (a new tag shows in the
    suggestions within it)."""
    key = "croniq:job-filter-suggestions"
    if projects is not None:
        key += ":" + hashlib.sha256(",".join(projects).encode()).hexdigest()[:16]
    return cache.get_or_set(key, lambda: read_suggestions(projects), SUGGESTIONS_CACHE_SECONDS)


def read_suggestions(projects: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    counted: dict[str, Counter] = {"tags": Counter(), "labels": Counter(), "owners": Counter()}
    jobs = Job.objects.all() if projects is None else Job.objects.filter(project__in=projects)
    for job_tags, labels, owner in jobs.values_list("tags", "labels", "owner"):
        counted["tags"].update(job_tags or [])
        counted["labels"].update(label for label in labels or [] if isinstance(label, str))
        if owner:
            counted["owners"][owner] += 1
    return {
        key: [value for value, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:200]
        for key, counts in counted.items()
    }
