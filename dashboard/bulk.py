"""Bulk actions on jobs from the overview (docs/design.md §17): pause,
resume or run the jobs ticked on the page, or every job a filter matches.

Two posts. The first names the action and the jobs and changes nothing:
the server finds the jobs, asks for each whether the user may act on it,
and answers a confirmation naming the action and how many jobs. The second
carries that confirmation's `confirm`, a digest of the action and the jobs
it named: the server finds and checks them again, and acts only when they
are still the same (else it asks again). Each job is then paused, resumed
or run by `scheduler.runs.operations`, the single actions' code, and
audited as they are, with `bulk` (how many jobs the action covered) in the
event's data."""

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core import permissions
from dashboard import seen
from dashboard.job_filters import JobFilter
from scheduler.models import Job
from scheduler.runs import operations

# action -> (core.permissions action, verb, past participle)
ACTIONS = {
    "pause": ("job.pause", "Pause", "paused"),
    "resume": ("job.resume", "Resume", "resumed"),
    "run": ("job.run", "Run now", "started"),
}
SELECTED, FILTER = "selected", "filter"
# Ticked on one page of the overview (50 rows): far fewer.
MAX_SELECTED = 500
# As many jobs as one apply document holds.
MAX_JOBS = 5_000
# Names shown on the confirmation; the rest are counted.
NAMES_SHOWN = 100


class BulkError(ValueError):
    """A bulk request that cannot be carried out as posted."""


@dataclass
class Selection:
    """The jobs an action is asked for, split by whether the user may act on each."""

    action: str
    scope: str
    job_filter: JobFilter
    names: list[str]  # as posted (scope selected)
    jobs: list[Job] = field(default_factory=list)  # the user may act on them
    refused: list[str] = field(default_factory=list)  # names the user may not act on

    @property
    def permission(self) -> str:
        return ACTIONS[self.action][0]

    @property
    def verb(self) -> str:
        return ACTIONS[self.action][1]

    @property
    def digest(self) -> str:
        return digest(self.action, [job.pk for job in self.jobs])


def digest(action: str, job_ids: list[int]) -> str:
    """What a confirmation names: the action and the jobs it acts on."""
    ids = ",".join(str(pk) for pk in sorted(job_ids))
    return hashlib.sha256(f"{action}:{ids}".encode()).hexdigest()[:32]


def read(params: Any) -> tuple[str, str, JobFilter, list[str]]:
    """(action, scope, filter, names) from a bulk action's form; BulkError
    naming the field that is wrong."""
    action = params.get("action", "")
    if action not in ACTIONS:
        raise BulkError(f"action: one of {', '.join(ACTIONS)}")
    scope = params.get("scope", SELECTED)
    if scope not in (SELECTED, FILTER):
        raise BulkError(f"scope: {SELECTED} or {FILTER}")
    try:
        job_filter = JobFilter.read(params, strict=True)
    except ValueError as e:
        raise BulkError(str(e)) from None
    names = []
    if scope == SELECTED:
        names = list(dict.fromkeys(name for name in params.getlist("job") if name))
        if len(names) > MAX_SELECTED:
            raise BulkError(f"job: at most {MAX_SELECTED} jobs ticked, or use the filter")
        if any("\x00" in name or len(name) > 100 for name in names):
            raise BulkError("job: not a job's name")
    return action, scope, job_filter, names


def select(
    user: Any, action: str, scope: str, job_filter: JobFilter, names: list[str], now: datetime
) -> Selection:
    """The jobs the action would act on, each checked against the user's
    permission for it (core.permissions.allows, by the role in the job's
    project). A filter matches among the jobs the user sees; a ticked job
    of another project is refused like any other. Jobs gone since they
    were ticked are left out."""
    selection = Selection(action, scope, job_filter, names)
    if scope == SELECTED:
        jobs = Job.objects.filter(name__in=names)
    else:
        jobs = job_filter.jobs(now, seen.jobs(user))
    found = list(jobs.order_by("name")[: MAX_JOBS + 1])
    if len(found) > MAX_JOBS:
        raise BulkError(f"the filter matches more than {MAX_JOBS} jobs: narrow it")
    for job in found:
        if permissions.allows(user, selection.permission, job):
            selection.jobs.append(job)
        else:
            selection.refused.append(job.name)
    return selection


@dataclass
class Outcome:
    """What a bulk action did: `done` jobs changed (or runs started),
    `unchanged` already as asked, `refused` by the job's own policy
    ([(name, why)], runs only)."""

    done: int = 0
    unchanged: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)


def carry_out(selection: Selection, user: Any, now: datetime, reason: str = "") -> Outcome:
    """The action on each job of `selection`, audited per job as the
    single actions are, `bulk` in each event's data."""
    outcome = Outcome()
    note = {"bulk": len(selection.jobs)}
    ids = [job.pk for job in selection.jobs]
    if selection.action == "pause":
        outcome.done = operations.pause(
            Job.objects.filter(pk__in=ids), now, user, reason=reason, note=note
        )
    elif selection.action == "resume":
        outcome.done = operations.resume(Job.objects.filter(pk__in=ids), now, user, note=note)
    else:
        for job in selection.jobs:
            try:
                operations.run_now(job, now, user, note=note)
                outcome.done += 1
            except operations.OperationRefused as e:
                outcome.refused.append((job.name, str(e)))
    outcome.unchanged = len(ids) - outcome.done - len(outcome.refused)
    return outcome


def summary(selection: Selection, outcome: Outcome, reason: str = "") -> str:
    """The message the overview shows after the action."""
    count = len(selection.jobs)
    if selection.action == "pause":
        text = f"Paused {outcome.done} of {count} job(s): {reason}"
        already = "were paused already"
    elif selection.action == "resume":
        text = f"Resumed {outcome.done} of {count} job(s)"
        already = "were neither paused nor in error"
    else:
        text = f"Started a run of {outcome.done} of {count} job(s)"
        already = ""
    if outcome.unchanged and already:
        text += f"; {outcome.unchanged} {already}"
    if outcome.refused:
        shown = "; ".join(why for _, why in outcome.refused[:5])
        more = f" and {len(outcome.refused) - 5} more" if len(outcome.refused) > 5 else ""
        text += f"; {len(outcome.refused)} refused: {shown}{more}"
    return text + "."
