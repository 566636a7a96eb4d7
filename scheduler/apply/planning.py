"""Checking the items of an apply and planning their writes, reading only
(docs/design.md §5): calendars (in base order), concurrency groups, then
jobs, each written through `upsert`. Errors name the item and field
("jobs[3].schedule: ..."); `scheduler.apply.writing` writes the plan."""

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection

from audit.changes import masked_diff
from calendars.models import Calendar, CalendarPeriod
from calendars.rules import RulesError
from core.ownership import ManagedBy
from projects import names as project_names
from projects.models import DEFAULT as DEFAULT_PROJECT
from projects.models import Project
from scheduler.apply.fields import (
    CALENDAR_KEYS,
    GROUP_KEYS,
    JOB_DEFAULTS,
    JOB_DURATIONS,
    JOB_KEYS,
    JOB_SIZE_BOUNDS,
    JOB_SIZES,
    PROJECT_KEYS,
)
from scheduler.apply.items import (
    ApplyError,
    calendar_state,
    calendar_values,
    container_spec,
    describe_errors,
    exit_codes,
    group_state,
    http_request,
    instant,
    item_problem,
    job_env,
    job_state,
    one_shot_instants,
    order_by_base,
    parameter_names,
    period_values,
    periods_of,
    project_name,
    quoted,
    requirement_list,
    schedule_list,
    seconds,
    size,
    string_list,
    tag_list,
    whole_number,
)
from scheduler.apply.report import Change
from scheduler.apply.upsert import upsert
from scheduler.jobs import chain_graph, job_checks, requires
from scheduler.jobs.cron import ScheduleError
from scheduler.models import ConcurrencyGroup, Job

# How many fire times the plan shows before and after a schedule change.
PLANNED_FIRES = 5
# Names read in one query (SQLite binds at most 32,766 parameters).
LOOKUP_BATCH = 500
# Job fields whose change moves its fire times (enabled does not: it stops them).
FIRE_FIELDS = frozenset({"schedule", "timezone", "calendar", "calendar_policy", "jitter"}) | {
    "schedules", "at", "not_before", "not_after", "max_runs",
}  # fmt: skip


def batched(items: list[Any], size: int) -> list[list[Any]]:
    """`items` in lists of at most `size`."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def unsaved_in_chain(calendar: Calendar) -> bool:
    """Whether `calendar`'s base chain holds a calendar not yet created."""
    seen = set()
    base = calendar.base
    while base is not None and id(base) not in seen:
        if base.pk is None:
            return True
        seen.add(id(base))
        base = base.base
    return False


@dataclass
class Write:
    """One row the plan writes: created, or updated in `fields` when its
    `updated_at` is still `version` (what the plan read)."""

    row: object
    fields: list = None  # None: a new row
    version: object = None
    periods: list = None  # a calendar's, replacing those it had


class Planner:
    """Checks items and plans their writes, reading only; what it creates or
    updates is marked `managed_by` (apply: "apply"; the management API, one
    item at a time: "api"). `Applier` (scheduler.apply.writing) writes them."""

    def __init__(
        self,
        now,
        actor,
        source,
        managed_by=ManagedBy.APPLY,
        via: str = "apply",
        managed_source: str = "",
        projects: set[str] | None = None,
    ) -> None:
        self.now = now
        self.actor = actor
        self.source = source
        self.managed_by = managed_by
        # Only apply's rows belong to a file (core.ownership.own).
        self.managed_source = managed_source if managed_by == ManagedBy.APPLY else ""
        self.via = via
        self.errors = []
        self.changes = []
        self.calendar_names = []
        self.group_names = []
        self.chained = []  # [(where, job)] whose chains are checked after all jobs
        self.job_names = []
        self.writes = []  # [Write] in the order they are made
        # Rows as this document makes them, by name: what later items refer to.
        self.planned_calendars = {}
        self.planned_groups = {}
        self.stored_jobs = {}  # name: the job as stored, read once for all items
        self.rules = {}  # calendar name: its CalendarRules as this document makes them
        self.touched_calendars = []  # calendars whose rules this document changes
        self.jobs_to_reschedule = []
        self.fire_changes = {}  # job name: its Change, whose fire times moved
        # The projects the caller may write (a key bound to one, a project
        # editor): None for every project. The document's own `project:`
        # and the projects its `projects:` section declares.
        self.projects = projects
        self.project = DEFAULT_PROJECT
        self.declared = {}  # name: description
        self.known_projects = None  # read once, when the first item asks

    def plan(self, document: dict[str, Any]) -> None:
        """Check every item and plan its writes, reading only."""
        self.plan_projects(document)
        self.apply_calendars(document.get("calendars") or [])
        self.apply_groups(document.get("concurrency_groups") or [])
        self.apply_jobs(document.get("jobs") or [])

    def attempt(self, plan_item: Any, where: str, item: dict[str, Any]) -> None:
        """Plan one item; its errors, named by item and field, join `errors`."""
        try:
            plan_item(where, item)
        except ValidationError as e:
            self.errors.extend(describe_errors(where, e))
        except ApplyError as e:
            self.errors.extend(e.errors)

    # Projects

    def plan_projects(self, document: dict[str, Any]) -> None:
        """The `projects:` section (created, or their description changed,
        before any item names them) and the document's `project:`, which
        every item without a `project` of its own belongs to."""
        for where, item in self.check_items(
            "projects", document.get("projects") or [], PROJECT_KEYS
        ):
            if self.projects is not None:
                self.errors.append(f"{where}: only a global key or a superuser declares projects")
                continue
            try:
                name = project_name(f"{where}.name", item["name"])
                description = item.get("description") or ""
                if not isinstance(description, str):
                    raise ApplyError(f"{where}.description: expected text")
            except ApplyError as e:
                self.errors.extend(e.errors)
                continue
            self.declared[name] = description
        chosen = document.get("project")
        if chosen is None:
            return
        try:
            self.project = project_name("project", chosen)
        except ApplyError as e:
            self.errors.extend(e.errors)
            return
        if not self.may_write(self.project):
            self.errors.append(f"project: no project named {quoted(self.project)}")

    def may_write(self, project: str) -> bool:
        """Whether the document may put rows in `project`: it exists (or
        the document declares it) and the caller may write it."""
        if self.projects is not None and project not in self.projects:
            return False
        if self.known_projects is None:
            self.known_projects = project_names.known()
        return project in self.known_projects or project in self.declared

    def project_for(self, name: Any, stored: Any) -> str:
        """The project of an item whose own `project` is `name` (None: the
        document's), stored as `stored`: ValidationError when the caller may
        not write it, or may not write the stored row's. To a caller bound
        to projects, the others do not exist: "no project named"."""
        if name is not None:
            try:
                name = project_name("project", name)
            except ApplyError:
                raise ValidationError(
                    {"project": "expected a project's name: letters, digits, - and _"}
                ) from None
        chosen = name or self.project
        if not self.may_write(chosen):
            raise ValidationError({"project": f"no project named {quoted(chosen)}"})
        if stored is not None and not self.may_write(stored.project):
            raise ValidationError({"name": f"{quoted(stored.name)} is taken"})
        return chosen

    def prunable(self, rows: Any) -> Any:
        """`rows` narrowed to the projects the caller may write: a bound
        caller's prune never reaches another project's rows, nor its
        references another project's calendars and groups."""
        return rows if self.projects is None else rows.filter(project__in=sorted(self.projects))

    def write_projects(self) -> None:
        """Create the declared projects, or change their description."""
        stored = {p.name: p for p in Project.objects.filter(name__in=list(self.declared))}
        for name, description in self.declared.items():
            project = stored.get(name)
            before = None if project is None else {"description": project.description}
            if project is None:
                project = Project.objects.create(name=name, description=description)
            elif project.description != description:
                project.description = description
                project.save(update_fields=["description"])
            self.record_change(
                "project", name, before, {"description": description}, target=project
            )

    def schedule_new(self, job: Job) -> None:
        """A new job's first fire time, as Job.reschedule computes it (a new
        job has no execution to withdraw), from its calendar as planned."""
        if job.calendar is not None:
            job.calendar = job.calendar  # its id, set once a new calendar is written
            job._calendar_rules = (job.calendar_id, self.rules_of(job.calendar))
        job.next_run_at = job.next_fire_after(self.now) if job.is_active else None

    def apply_calendars(self, items: list[Any]) -> None:
        indexed = self.check_items("calendars", items, CALENDAR_KEYS)
        for where, item in order_by_base(indexed):
            self.calendar_names.append(item["name"])
            self.attempt(self.apply_calendar, where, item)

    def apply_calendar(self, where: str, item: dict[str, Any]) -> None:
        values = calendar_values(where, item, self.calendar_named)
        periods = [period_values(f"{where}.{k}[{i}]", k, p) for k, i, p in periods_of(where, item)]
        planned_periods = []

        def clean(calendar) -> None:
            # A base chain through calendars still to be created is checked for
            # cycles by `order_by_base`: unsaved, they have no pk to compare.
            calendar.full_clean(exclude=["base"] if unsaved_in_chain(calendar) else None)
            planned_periods[:] = [CalendarPeriod(calendar=calendar, **p) for p in periods]
            for period in planned_periods:
                period.full_clean(exclude=["calendar"])

        def write(calendar, version, before, after) -> None:
            fields = (
                None if version is None else [*values, "project", "managed_by", "managed_source"]
            )
            fields = fields and [*fields, "updated_at"]
            self.writes.append(Write(calendar, fields, version, periods))
            if version is not None:  # a new calendar has no jobs but this document's new ones
                self.touched_calendars.append(calendar)

        calendar = upsert(
            self,
            "calendar",
            Calendar,
            item["name"],
            values,
            state=calendar_state,
            planned_state=lambda calendar: calendar_state(calendar, planned_periods),
            clean=clean,
            write=write,
            project=item.get("project"),
        )
        self.planned_calendars[calendar.name] = calendar
        self.rules[calendar.name] = self.planned_rules(calendar, planned_periods)

    def calendar_named(self, name: str) -> Calendar | None:
        """The calendar `name` as this document makes it, else as stored, or
        None: also a stored one of a project the caller may not write, which
        to it does not exist (a job or a base names it in vain)."""
        if name in self.planned_calendars:
            return self.planned_calendars[name]
        return self.prunable(Calendar.objects.filter(name=name)).first()

    def planned_rules(self, calendar: Calendar, periods: list[CalendarPeriod]) -> Any:
        """The CalendarRules of `calendar` with `periods`, its base as this
        document makes it: what the jobs on it are checked against."""
        base = None
        if calendar.base is not None:
            base = self.rules_of(calendar.base)
        return calendar.rules_with(periods, base)

    def rules_of(self, calendar: Calendar) -> Any:
        """The CalendarRules of `calendar`, read once per apply; a calendar
        the document does not list is read as stored, on its base as planned."""
        if calendar.name not in self.rules:
            periods = list(calendar.periods.all())
            self.rules[calendar.name] = self.planned_rules(calendar, periods)
        return self.rules[calendar.name]

    # Concurrency groups

    def apply_groups(self, items: list[Any]) -> None:
        for where, item in self.check_items("concurrency_groups", items, GROUP_KEYS):
            self.group_names.append(item["name"])
            self.attempt(self.apply_group, where, item)

    def apply_group(self, where: str, item: dict[str, Any]) -> None:
        values = {
            "max_concurrent": whole_number(
                f"{where}.max_concurrent", item.get("max_concurrent"), least=1
            ),
            "description": item.get("description") or "",
        }

        def write(group, version, before, after) -> None:
            fields = None if version is None else [*after, "updated_at"]
            self.writes.append(Write(group, fields, version))

        group = upsert(
            self,
            "concurrency_group",
            ConcurrencyGroup,
            item["name"],
            values,
            state=group_state,
            write=write,
            project=item.get("project"),
        )
        self.planned_groups[group.name] = group

    def group_named(self, name: str) -> ConcurrencyGroup | None:
        """As `calendar_named`, a concurrency group."""
        if name in self.planned_groups:
            return self.planned_groups[name]
        return self.prunable(ConcurrencyGroup.objects.filter(name=name)).first()

    # Jobs

    def apply_jobs(self, items: list[Any]) -> None:
        checked = self.check_items("jobs", items, JOB_KEYS)
        self.read_jobs([item["name"] for _, item in checked])
        for where, item in checked:
            self.job_names.append(item["name"])
            self.attempt(self.apply_job, where, item)
        self.check_chains()

    def read_jobs(self, names: list[str]) -> None:
        """The stored jobs of these names, read in a few queries, not one each."""
        rows = Job.objects.select_related("calendar", "concurrency_group")
        for chunk in batched(names, LOOKUP_BATCH):
            self.stored_jobs.update((job.name, job) for job in rows.filter(name__in=chunk))

    def stored_job(self, name: str) -> Job | None:
        if name not in self.stored_jobs:
            self.read_jobs([name])
        return self.stored_jobs.get(name)

    def check_chains(self) -> None:
        """The chains of the jobs planned, against every job as it stands
        (this document's included): a missing job or a cycle is an error
        naming the item and field. Read in one query; inside the write,
        under the chain graph's lock (`chain_graph.lock`), so a chain
        another writer stored since the plan is seen."""
        if not self.chained:
            return
        if connection.in_atomic_block and any(
            j.on_success or j.on_failure or j.requires for _, j in self.chained
        ):
            chain_graph.lock()
        graph = chain_graph.graph_of(Job.objects.values_list("name", *chain_graph.GRAPH_FIELDS))
        graph.update(
            (job.name, (job.on_success, job.on_failure, requires.names(job.requires)))
            for _, job in self.chained
        )
        for where, job in self.chained:
            job.defer_chain_check = False
            for key, message in job.chain_problems(graph).items():
                self.errors.append(f"{where}.{key}: {message}")
            job.defer_chain_check = True

    def apply_job(self, where: str, item: dict[str, Any]) -> None:
        values = {**JOB_DEFAULTS, **item}
        # Its references name secrets of its own project (docs/design.md §11).
        owner = item.get("project") or self.project
        owner = owner if isinstance(owner, str) else None  # refused by upsert
        values["env"] = job_env(f"{where}.env", values["env"], owner)
        values["http"] = http_request(f"{where}.http", values["http"], values["timeout"], owner)
        values["container"] = container_spec(f"{where}.container", values["container"], owner)
        values["labels"] = string_list(f"{where}.labels", values["labels"])
        values["tags"] = tag_list(f"{where}.tags", values["tags"])
        values["parameters"] = parameter_names(f"{where}.parameters", values["parameters"])
        for key in ("on_success", "on_failure"):
            values[key] = string_list(f"{where}.{key}", values[key])
        values["requires"] = requirement_list(f"{where}.requires", values["requires"])
        for key in JOB_DURATIONS:
            if values[key] is not None:
                values[key] = seconds(f"{where}.{key}", values[key], least=1)
        for key in JOB_SIZES:
            if values[key] is not None:
                least, most = JOB_SIZE_BOUNDS[key]
                values[key] = size(f"{where}.{key}", values[key], least, most)
        if values["max_cpu_seconds"] is not None:
            values["max_cpu_seconds"] = seconds(
                f"{where}.max_cpu_seconds", values["max_cpu_seconds"], least=1
            )
        values["success_exit_codes"] = exit_codes(
            f"{where}.success_exit_codes", values["success_exit_codes"]
        )
        if values["owner"] is None:
            values["owner"] = ""
        for key, least in (("pause_after_failures", 1), ("max_concurrent", 1), ("max_queue", 0)):
            if values[key] is not None:
                values[key] = whole_number(f"{where}.{key}", values[key], least=least)
        self.timing_values(where, item, values)
        group_name = values.pop("concurrency_group")
        group = None
        if group_name is not None:
            group = self.group_named(group_name)
            if group is None:
                raise ApplyError(
                    f"{where}.concurrency_group: no concurrency group named {quoted(group_name)}"
                )
        calendar_name = values.pop("calendar")
        calendar = None
        if calendar_name is not None:
            calendar = self.calendar_named(calendar_name)
            if calendar is None:
                raise ApplyError(f"{where}.calendar: no calendar named {quoted(calendar_name)}")
        values["calendar"], values["concurrency_group"] = calendar, group
        rules = self.rules_of(calendar) if calendar is not None else None

        def clean(job) -> None:
            # Chains may name jobs later in the file: checked once all are planned.
            job.defer_chain_check = True
            if calendar is not None and calendar.pk is not None:
                job._calendar_rules = (calendar.pk, rules)  # the calendar as planned
            job.full_clean()
            if calendar is not None and calendar.pk is None:
                self.check_fires(where, job, rules)  # full_clean could not: no calendar yet

        changed = set()  # the fields of a stored job the file changes

        def write(job, version, before, after) -> None:
            if before is None:
                if calendar is None or calendar.pk is not None:
                    self.schedule_new(job)  # now, not while the write holds the lock
                self.writes.append(Write(job))
                return
            # Only the fields the file changes: the scheduler's own fields
            # were read before the loop may have moved them on.
            changed.update(k for k in after if before.get(k) != after[k])
            counted = ["scheduled_runs"] if "max_runs" in changed else []  # Job.sync_run_limit
            self.writes.append(Write(job, [*sorted(changed), *counted, "updated_at"], version))

        stored = self.stored_job(item["name"])
        job = upsert(
            self,
            "job",
            Job,
            item["name"],
            values,
            stored=stored,
            state=job_state,
            clean=clean,
            write=write,
        )
        self.chained.append((where, job))
        if changed & FIRE_FIELDS:
            # As stored; "after" once rescheduled: an @every job's grid starts anew.
            self.changes[-1].fires = {"before": self.fires_of(stored)}
            self.fire_changes[job.name] = self.changes[-1]
        if changed & Job.SCHEDULE_FIELDS:
            self.jobs_to_reschedule.append(job)

    def timing_values(self, where: str, item: dict[str, Any], values: dict[str, Any]) -> None:
        """`schedules`, `at`, the bounds and `max_runs` as the job stores them
        (docs/design.md §14); an `at` instant already past is refused unless
        the job has it already. With `schedules` or `at` and no `schedule`,
        the job has none."""
        name = item["name"]
        values["schedules"] = schedule_list(f"{where}.schedules", values["schedules"], key=name)
        stored = self.stored_job(name)
        kept = stored.at if stored is not None else []
        values["at"] = one_shot_instants(f"{where}.at", values["at"], self.now, kept)
        for key in ("not_before", "not_after"):
            if values[key] is not None:
                values[key] = instant(f"{where}.{key}", values[key])
        if values["max_runs"] is not None:
            values["max_runs"] = whole_number(f"{where}.max_runs", values["max_runs"], least=1)
        if "schedule" not in item and ("schedules" in item or "at" in item):
            values["schedule"] = ""

    def check_fires(self, where: str, job: Job, rules: Any) -> None:
        """The check full_clean makes of a job whose calendar is still to be
        created: its schedules must fire within the horizon."""
        problems = job_checks.source_problems(job, rules)
        if problems:
            raise ValidationError(problems)

    def fires_of(self, job: Job) -> list[Any]:
        """The job's next fire instants after `now`, counted as the loop
        counts them (Job.upcoming); [None] when its schedule cannot be read."""
        try:
            return job.upcoming(self.now, PLANNED_FIRES)
        except (ScheduleError, RulesError, ValueError):
            return [None]

    # Prune, reschedule, audit

    def check_items(
        self, key: str, items: Any, allowed: set[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """[(where, item)] for well-formed items; errors for the others."""
        good, seen = [], set()
        for index, item in enumerate(items):
            where = f"{key}[{index}]"
            # Every section's items may name their project (docs/design.md §11).
            problem = item_problem(where, item, allowed | {"project"})
            if problem:
                self.errors.append(problem)
                continue
            name = item["name"]
            if name in seen:
                self.errors.append(f"{where}.name: {quoted(name)} is listed twice")
                continue
            seen.add(name)
            good.append((where, item))
        return good

    def record_change(
        self,
        kind: str,
        name: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        mask: Any = masked_diff,
        target: Any = None,
    ) -> None:
        """Note the change of one item; `mask` hides secrets in its diff."""
        if before is None:
            change = Change("create", kind, name, {k: [None, v] for k, v in after.items()})
        elif after is None:
            change = Change("delete", kind, name, {k: [v, None] for k, v in before.items()})
        else:
            diff = {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}
            change = Change("update" if diff else "unchanged", kind, name, diff)
        # Printed (apply --json, CI logs) and audited: secret env values masked.
        change.diff = mask(change.diff)
        change.target = target
        self.changes.append(change)
