"""Writing an apply's plan (scheduler.apply.planning) in one short
transaction, with the sections apps add; pruning what the file no longer
lists; rescheduling the jobs it moved; one audit event per change."""

import copy
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from audit.recording import event_of, record_many
from calendars.models import Calendar, CalendarPeriod
from core.ownership import ManagedBy
from scheduler.apply.items import ApplyError, calendar_state, group_state, job_state
from scheduler.apply.planning import LOOKUP_BATCH, Planner, batched
from scheduler.apply.report import Change
from scheduler.apply.sections import added_sections
from scheduler.firing import job_edits
from scheduler.jobs.calendar_changes import jobs_on_calendars
from scheduler.models import ConcurrencyGroup, Job


class Conflict(Exception):
    """A row the plan read was changed before the plan was written."""


class Applier(Planner):
    """Plans (Planner), then writes: `write` (or `write_rows`)."""

    def write(self, document: dict[str, Any], *, prune: bool, dry_run: bool) -> list[Change]:
        """Write the plan in one transaction, with the sections apps add,
        and return the Changes; Conflict when a row planned was changed
        since it was read, ApplyError when an item is wrong."""
        try:
            with transaction.atomic():
                added = [(keys, factory(self)) for keys, factory in added_sections()]
                self.write_projects()  # before any row names them
                self.write_rows()
                self.check_chains()
                for keys, section in added:
                    section.apply({key: document.get(key) or [] for key in keys})
                if prune:
                    # What sits on jobs and calendars (a rule's calendar) goes first.
                    for _, section in reversed(added):
                        section.prune()
                    self.prune()
                if self.errors:
                    raise ApplyError(self.errors)
                self.reschedule()
                if dry_run:
                    transaction.set_rollback(True)
                else:
                    self.audit()
        except IntegrityError:
            # A row of a name the plan creates was created meanwhile.
            raise Conflict() from None
        return self.changes

    def write_rows(self) -> None:
        """The planned rows, after checking that none changed since the plan
        read it (Conflict). Calendars first (in base order), then groups,
        then jobs: each refers only to rows written before it. New jobs go
        in a few statements, their first fire time computed already."""
        self.check_versions()
        new_jobs = []
        for write in self.writes:
            row = write.row
            if isinstance(row, Job) and write.fields is None:
                new_jobs.append(row)
            elif write.fields is None:
                row.save()
            else:
                row.save(update_fields=write.fields)
            if write.periods is not None:
                row.periods.all().delete()
                CalendarPeriod.objects.bulk_create(
                    CalendarPeriod(calendar=row, **p) for p in write.periods
                )
        for job in new_jobs:
            if job.calendar is not None and job.calendar_id is None:
                self.schedule_new(job)  # its calendar is new: it has a pk only now
        Job.objects.bulk_create(new_jobs, batch_size=LOOKUP_BATCH)
        if new_jobs:
            job_edits.saved()  # what Job.save tells a sleeping loop, once

    def check_versions(self) -> None:
        """Conflict unless every row the plan updates is as it was read."""
        planned = {}
        for write in self.writes:
            if write.fields is not None:
                planned.setdefault(type(write.row), {})[write.row.pk] = write.version
        for model, versions in planned.items():
            for ids in batched(list(versions), LOOKUP_BATCH):
                stored = dict(model.objects.filter(pk__in=ids).values_list("pk", "updated_at"))
                if any(stored.get(pk) != versions[pk] for pk in ids):
                    raise Conflict()

    # Calendars

    def prune(self) -> None:
        """Delete what this file (its source) manages and no longer lists;
        rows of other files, and those made or adopted through the API or
        the admin, stay."""
        managed = {"managed_by": ManagedBy.APPLY, "managed_source": self.managed_source}
        unlisted_jobs = self.prunable(Job.objects.filter(**managed))
        for job in unlisted_jobs.exclude(name__in=self.job_names):
            # A copy keeps the pk that delete() clears: the event's target.
            target = copy.copy(job)
            self.record_change("job", job.name, job_state(job), None, target=target)
            job.delete()
        unlisted_groups = self.prunable(ConcurrencyGroup.objects.filter(**managed))
        for group in unlisted_groups.exclude(name__in=self.group_names):
            before, target = group_state(group), copy.copy(group)
            try:
                with transaction.atomic():
                    group.delete()
            except ProtectedError:
                self.errors.append(
                    f"concurrency_groups: {group.name!r} is still used by a job; "
                    "list it in the file or move its jobs out"
                )
                continue
            self.record_change("concurrency_group", group.name, before, None, target=target)
        unlisted_calendars = self.prunable(Calendar.objects.filter(**managed))
        for calendar in unlisted_calendars.exclude(name__in=self.calendar_names).order_by("-pk"):
            before = calendar_state(calendar)
            target = copy.copy(calendar)
            try:
                with transaction.atomic():
                    calendar.delete()
            except ProtectedError:
                self.errors.append(
                    f"calendars: {calendar.name!r} is still used by a job, a calendar or "
                    "a notification rule; list it in the file or remove what uses it"
                )
                continue
            self.record_change("calendar", calendar.name, before, None, target=target)

    def reschedule(self) -> None:
        """Next fire times of the jobs whose schedule changed and of the jobs
        on the calendars that changed, from the rules as planned."""
        ids = {job.pk for job in self.jobs_to_reschedule}
        # New jobs were scheduled as they were written.
        created = {w.row.pk for w in self.writes if isinstance(w.row, Job) and w.fields is None}
        touched = [calendar.pk for calendar in self.touched_calendars]
        jobs = Job.objects.filter(pk__in=ids) | jobs_on_calendars(touched)
        for job in jobs.select_related("calendar").distinct():
            if job.pk in created:
                continue
            if job.calendar is not None:
                job._calendar_rules = (job.calendar_id, self.rules_of(job.calendar))
            job.reschedule(self.now)
            job.save(update_fields=["next_run_at", "updated_at"])
            if job.name in self.fire_changes:
                self.fire_changes[job.name].fires["after"] = self.fires_of(job)

    def audit(self) -> None:
        """One event per change, written together: thousands of rows of a
        large apply are a few statements, not thousands."""
        events = []
        for change in self.changes:
            if change.action == "unchanged":
                continue
            verb = {"create": "created", "update": "changed", "delete": "deleted"}[change.action]
            events.append(
                event_of(
                    f"{change.kind}.{verb}",
                    target=change.target,
                    actor=self.actor,
                    at=self.now,
                    data={
                        "name": change.name,
                        "diff": change.diff,
                        "via": self.via,
                        "source": self.source,
                    },
                )
            )
        record_many(events)

    # Helpers
