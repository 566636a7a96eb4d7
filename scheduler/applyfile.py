"""Jobs and calendars as code: `manage.py apply FILE` (DESIGN.md §5).

The whole file is validated and applied in one transaction: the first bad
item rolls everything back, and errors name the item and field
("jobs[3].schedule: ..."). Applying the same file twice changes nothing.

Apps above the scheduler add top-level sections of their own (the
notifications app: `channels` and `notify`, DESIGN.md §9) with
`add_sections`, so the scheduler reads them without importing those apps,
and their items are applied in the same transaction as jobs and calendars.
"""

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError

import audit
from audit.changes import masked_diff
from calendars.models import Calendar, CalendarPeriod, ManagedBy
from calendars.rules import RulesError
from calendars.validators import text_problems
from scheduler.applyitems import (
    CALENDAR_KEYS,
    GROUP_KEYS,
    JOB_DEFAULTS,
    JOB_DURATIONS,
    JOB_KEYS,
    YAML_PATHS,
    ApplyError,
    calendar_state,
    calendar_values,
    group_state,
    job_state,
    order_by_base,
    parameter_names,
    period_values,
    periods_of,
    quoted,
    seconds,
    string_list,
    string_mapping,
    whole_number,
)
from scheduler.calendar_changes import jobs_on_calendars
from scheduler.cron import ScheduleError
from scheduler.models import ConcurrencyGroup, Job

BUILT_IN_SECTIONS = ("calendars", "concurrency_groups", "jobs")
# The largest document read, in characters (a file: in bytes), as a file
# or over HTTP (the API's body limit, Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
# is the same 2.5 MB): a bound on the work and memory one apply takes.
MAX_DOCUMENT_CHARS = 2_621_440
# The safe loader, in C when PyYAML was built with libyaml.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# How many fire times the plan shows before and after a schedule change.
PLANNED_FIRES = 5
# Job fields whose change moves its fire times (enabled does not: it stops them).
FIRE_FIELDS = frozenset({"schedule", "timezone", "calendar", "calendar_policy", "jitter"})
# [(keys, factory)] added by apps above the scheduler, in the order applied.
_sections = []


def add_sections(keys, factory):
    """Accept the top-level `keys` in apply files, applied by `factory`.

    For each apply, after calendars and jobs, `factory(applier)` makes an
    object whose `apply({key: [items]})` checks and writes the items inside
    the apply's transaction (errors go to `applier.errors`, naming item and
    field; changes to `applier.record_change`) and whose `prune()` deletes
    what the file no longer names, before jobs and calendars are pruned.
    Adding the same keys again replaces their factory.
    """
    keys = tuple(keys)
    _sections[:] = [(k, f) for k, f in _sections if k != keys]
    _sections.append((keys, factory))


def added_sections():
    """[(keys, factory)] of the sections apps added, in the order applied."""
    return list(_sections)


def section_keys():
    return [*BUILT_IN_SECTIONS, *(key for keys, _ in _sections for key in keys)]


@dataclass
class Change:
    action: str  # create, update, delete, unchanged
    kind: str  # calendar, job
    name: str
    diff: dict = field(default_factory=dict)
    # The row created, updated or deleted: the audit event's target.
    target: object = field(default=None, repr=False, compare=False)
    # A job whose schedule changed: {"before": [...], "after": [...]}, its
    # next PLANNED_FIRES fire instants as they were and as they will be.
    fires: dict = field(default_factory=dict)

    def __str__(self):
        signs = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}
        text = f"{signs[self.action]} {self.kind} {self.name}"
        if self.action == "update":
            text += ": " + ", ".join(sorted(self.diff))
        return text

    def details(self):
        """Lines under the summary of an update: each changed field, old ->
        new, and for a schedule change the fire times before and after."""
        if self.action != "update":
            return []
        lines = [
            f"    {name}: {shown(old)} -> {shown(new)}"
            for name, (old, new) in sorted(self.diff.items())
        ]
        for when in ("before", "after"):
            if when in self.fires:
                instants = ", ".join(shown_instant(i) for i in self.fires[when]) or "none"
                lines.append(f"    next fires {when}: {instants}")
        return lines


def shown(value):
    """A field's value in the text plan: JSON, as `--json` writes it."""
    return json.dumps(value, default=str, ensure_ascii=False)


def shown_instant(instant):
    return instant.strftime("%Y-%m-%d %H:%M %Z") if instant is not None else "unknown"


def plan(changes):
    """What apply reports (`--json`, the API): the changes that change
    something, as JSON-friendly rows."""
    return [
        {
            "action": c.action,
            "kind": c.kind,
            "name": c.name,
            "diff": c.diff,
            "fires": c.fires or None,
        }
        for c in changes
        if c.action != "unchanged"
    ]


def source_name(text, where="source"):
    """The name an apply manages its jobs and calendars under (`--source`,
    by default the file's stem); ApplyError when it cannot be one."""
    limit = Job._meta.get_field("managed_source").max_length
    if not isinstance(text, str) or not text.strip():
        raise ApplyError(f"{where}: required: a name for the file, e.g. its stem")
    if len(text) > limit or not text.isprintable():
        raise ApplyError(f"{where}: at most {limit} printable characters, got {quoted(text)}")
    return text


def load(path):
    """The document in FILE (YAML or JSON), or ApplyError with a clear message."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_DOCUMENT_CHARS:  # not read at all: a bound on memory too
            raise ApplyError(f"{path}: too large: {size:,} bytes, at most {MAX_DOCUMENT_CHARS:,}")
        text = Path(path).read_text()
    except OSError as e:
        raise ApplyError(f"{path}: cannot read: {e.strerror}") from None
    return parse(text, "JSON" if str(path).endswith(".json") else "YAML", where=f"{path}: ")


def parse(text, syntax, where=""):
    """The document in `text` ("YAML" or "JSON" `syntax`), checked as `load`
    checks a file's (the API's YAML body is read here too), or ApplyError."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ApplyError(
            f"{where}document too large: {len(text):,} characters, at most {MAX_DOCUMENT_CHARS:,}"
        )
    try:
        document = json.loads(text) if syntax == "JSON" else yaml_document(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ApplyError(f"{where}not valid {syntax}: {e}") from None
    except RecursionError:
        raise ApplyError(f"{where}not valid {syntax}: nested too deeply") from None
    return check_document(document, where=where)


def yaml_document(text):
    """The YAML document in `text`, read without anchors and aliases: an
    alias is expanded by the loader, so a few hundred bytes of nested
    aliases ("billion laughs") become gigabytes. The events are scanned
    first (at the C parser's speed when libyaml is there), so a document
    holding one is refused before anything is built from it."""
    for event in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            mark = event.start_mark
            kind = "an alias" if isinstance(event, yaml.AliasEvent) else "an anchor"
            raise AliasRefused(
                f"{kind} at line {mark.line + 1}, column {mark.column + 1}: anchors and "
                "aliases (&name, *name) are not accepted, write the value out"
            )
    return yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 (a safe loader)


class AliasRefused(yaml.YAMLError):
    pass


def check_document(document, where=""):
    """The document if its shape is right (a mapping of known sections, each
    a list), else ApplyError; the items are checked when applied."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ApplyError(f"{where}expected a mapping with 'calendars' and 'jobs'")
    unknown = set(document) - set(section_keys())
    if unknown:
        raise ApplyError(f"{where}unknown top-level key(s): {', '.join(sorted(unknown))}")
    for key in section_keys():
        if not isinstance(document.get(key) or [], list):
            raise ApplyError(f"{key}: expected a list")
    return document


def apply(
    document,
    *,
    now,
    prune=False,
    dry_run=False,
    actor=("user", "apply"),
    source="",
    managed_source="",
):
    """Apply the document; returns the list of Changes. Raises ApplyError.

    The jobs and calendars it writes are marked as managed by
    `managed_source` (the file's name), and `prune` deletes only those of
    that source the document no longer lists: several files each manage
    their own. `source` is what the audit events say the document came from.
    """
    with transaction.atomic():
        applier = Applier(now=now, actor=actor, source=source, managed_source=managed_source)
        added = [(keys, factory(applier)) for keys, factory in _sections]
        applier.apply_calendars(document.get("calendars") or [])
        applier.apply_groups(document.get("concurrency_groups") or [])
        applier.apply_jobs(document.get("jobs") or [])
        for keys, section in added:
            section.apply({key: document.get(key) or [] for key in keys})
        if prune:
            # What sits on jobs and calendars (a rule's calendar) goes first.
            for _, section in reversed(added):
                section.prune()
            applier.prune()
        if applier.errors:
            raise ApplyError(applier.errors)
        applier.reschedule()
        if dry_run:
            transaction.set_rollback(True)
        else:
            applier.audit()
    return applier.changes


def apply_item(kind, item, *, now, actor, managed_by, via, source=""):
    """Check and write one job or calendar (`kind`) as apply would, marked
    `managed_by`; returns its Change. ApplyError names the field
    ("schedule: ..."). The management API's writes: one item, no file."""
    problem = item_problem("", item, {"job": JOB_KEYS, "calendar": CALENDAR_KEYS}[kind])
    if problem:
        raise ApplyError(relative_errors([problem]))
    applier = Applier(now=now, actor=actor, source=source, managed_by=managed_by, via=via)
    write = applier.apply_job if kind == "job" else applier.apply_calendar
    with transaction.atomic():
        try:
            write("", item)
        except (ValidationError, ApplyError) as e:
            raise ApplyError(item_errors(e)) from None
        applier.check_chains()
        if applier.errors:
            raise ApplyError(relative_errors(applier.errors))
        applier.reschedule()
        applier.audit()
    return applier.changes[-1]


def describe_errors(where, error):
    """'jobs[3].schedule: ...' lines from a ValidationError, each field
    named as the file names it (holiday_country -> holidays.country)."""
    if hasattr(error, "error_dict"):
        return [
            f"{field_path(where, name)}: {' '.join(m for e in errors for m in e.messages)}"
            for name, errors in error.error_dict.items()
        ]
    return [f"{where}: {' '.join(error.messages)}"]


def field_path(where, model_field):
    if model_field == "__all__":
        return where
    return f"{where}.{YAML_PATHS.get(model_field, model_field)}"


def item_problem(where, item, allowed):
    """What is wrong with the shape of one item (a mapping of `allowed`
    fields with a name), or None."""
    if not isinstance(item, dict):
        return f"{where}: expected a mapping"
    unknown = set(item) - allowed
    if unknown:
        return f"{where}: unknown field(s): {', '.join(sorted(unknown))}"
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return f"{where}.name: required"
    # Before any lookup by name: PostgreSQL refuses NUL even in a query.
    problems = text_problems(item)
    if problems:
        path, problem = problems[0]
        return f"{where}.{path}: {problem}"
    return None


def relative_errors(errors):
    """Errors of one item checked at where="" (a single job or calendar, as
    the API takes them): ".schedule: ..." -> "schedule: ...", ": ..." -> "..."."""
    return [e.removeprefix(".").removeprefix(": ") for e in errors]


def item_errors(error):
    """The errors of one item checked at where="", named by field."""
    if isinstance(error, ValidationError):
        return relative_errors(describe_errors("", error))
    return relative_errors(error.errors)


class Applier:
    """Checks and writes items; what it creates or updates is marked
    `managed_by` (apply: "apply"; the management API, one item at a time: "api")."""

    def __init__(
        self, now, actor, source, managed_by=ManagedBy.APPLY, via="apply", managed_source=""
    ):
        self.now = now
        self.actor = actor
        self.source = source
        self.managed_by = managed_by
        # Only apply's rows belong to a file.
        self.managed_source = managed_source if managed_by == ManagedBy.APPLY else ""
        self.via = via
        self.errors = []
        self.changes = []
        self.calendar_names = []
        self.group_names = []
        self.chained = []  # [(where, job)] whose chains are checked after all jobs
        self.job_names = []
        self.touched_calendars = set()
        self.jobs_to_reschedule = set()
        self.fire_changes = {}  # job pk: its Change, whose fire times moved

    # Calendars

    def apply_calendars(self, items):
        indexed = self.check_items("calendars", items, CALENDAR_KEYS)
        for where, item in order_by_base(indexed):
            self.calendar_names.append(item["name"])
            try:
                self.apply_calendar(where, item)
            except ValidationError as e:
                self.errors.extend(describe_errors(where, e))
            except ApplyError as e:
                self.errors.extend(e.errors)

    def apply_calendar(self, where, item):
        values = calendar_values(where, item)
        periods = [period_values(f"{where}.{k}[{i}]", k, p) for k, i, p in periods_of(where, item)]
        calendar = Calendar.objects.filter(name=item["name"]).first()
        before = calendar_state(calendar) if calendar else None
        calendar = calendar or Calendar(name=item["name"])
        for key, value in values.items():
            setattr(calendar, key, value)
        calendar.managed_by = self.managed_by
        calendar.managed_source = self.managed_source
        calendar.full_clean()
        for period in periods:
            CalendarPeriod(calendar=calendar, **period).full_clean(exclude=["calendar"])
        after = calendar_state(calendar, [CalendarPeriod(**p) for p in periods])
        if before != after:
            calendar.save()
            calendar.periods.all().delete()
            CalendarPeriod.objects.bulk_create(
                CalendarPeriod(calendar=calendar, **p) for p in periods
            )
            self.touched_calendars.add(calendar.pk)
        self.record_change("calendar", calendar.name, before, after, target=calendar)

    # Concurrency groups

    def apply_groups(self, items):
        for where, item in self.check_items("concurrency_groups", items, GROUP_KEYS):
            self.group_names.append(item["name"])
            try:
                self.apply_group(where, item)
            except ValidationError as e:
                self.errors.extend(describe_errors(where, e))
            except ApplyError as e:
                self.errors.extend(e.errors)

    def apply_group(self, where, item):
        budget = whole_number(f"{where}.max_concurrent", item.get("max_concurrent"), least=1)
        group = ConcurrencyGroup.objects.filter(name=item["name"]).first()
        before = group_state(group) if group else None
        group = group or ConcurrencyGroup(name=item["name"])
        group.max_concurrent = budget
        group.description = item.get("description") or ""
        group.managed_by = self.managed_by
        group.managed_source = self.managed_source
        group.full_clean()
        after = group_state(group)
        if before != after:
            group.save()
        self.record_change("concurrency_group", group.name, before, after, target=group)

    # Jobs

    def apply_jobs(self, items):
        for where, item in self.check_items("jobs", items, JOB_KEYS):
            self.job_names.append(item["name"])
            try:
                self.apply_job(where, item)
            except ValidationError as e:
                self.errors.extend(describe_errors(where, e))
            except ApplyError as e:
                self.errors.extend(e.errors)
        self.check_chains()

    def check_chains(self):
        """The chains of the jobs written, against every job as it now
        stands (this file's included): a missing job or a cycle is an error
        naming the item and field."""
        for where, job in self.chained:
            job.defer_chain_check = False
            for key, message in job.chain_problems().items():
                self.errors.append(f"{where}.{key}: {message}")

    def apply_job(self, where, item):
        values = {**JOB_DEFAULTS, **item}
        values["env"] = string_mapping(f"{where}.env", values["env"])
        values["labels"] = string_list(f"{where}.labels", values["labels"])
        values["parameters"] = parameter_names(f"{where}.parameters", values["parameters"])
        for key in ("on_success", "on_failure"):
            values[key] = string_list(f"{where}.{key}", values[key])
        for key in JOB_DURATIONS:
            if values[key] is not None:
                values[key] = seconds(f"{where}.{key}", values[key], least=1)
        if values["owner"] is None:
            values["owner"] = ""
        for key, least in (("pause_after_failures", 1), ("max_concurrent", 1), ("max_queue", 0)):
            if values[key] is not None:
                values[key] = whole_number(f"{where}.{key}", values[key], least=least)
        group_name = values.pop("concurrency_group")
        group = None
        if group_name is not None:
            group = ConcurrencyGroup.objects.filter(name=group_name).first()
            if group is None:
                raise ApplyError(
                    f"{where}.concurrency_group: no concurrency group named {quoted(group_name)}"
                )
        calendar_name = values.pop("calendar")
        calendar = None
        if calendar_name is not None:
            calendar = Calendar.objects.filter(name=calendar_name).first()
            if calendar is None:
                raise ApplyError(f"{where}.calendar: no calendar named {quoted(calendar_name)}")
        job = Job.objects.filter(name=item["name"]).first()
        before = job_state(job) if job else None
        job = job or Job(name=item["name"])
        for key, value in values.items():
            setattr(job, key, value)
        job.calendar = calendar
        job.concurrency_group = group
        job.managed_by = self.managed_by
        job.managed_source = self.managed_source
        # Chains may name jobs later in the file: checked once all are written.
        job.defer_chain_check = True
        job.full_clean()
        self.chained.append((where, job))
        after = job_state(job)
        changed = {k for k in after if before is None or before.get(k) != after[k]}
        moves_fires = before is not None and bool(changed & FIRE_FIELDS)
        # From the row as stored, not yet saved; only for a job whose fires move.
        fires_before = self.fires_of(Job.objects.get(pk=job.pk)) if moves_fires else None
        if before is None:
            job.save()
        elif changed:
            # Only the fields the file changes: the scheduler's own fields
            # were read before the loop may have moved them on.
            job.save(update_fields=[*sorted(changed), "updated_at"])
        self.record_change("job", job.name, before, after, target=job)
        if moves_fires:
            # "after" once rescheduled: an @every job's grid starts anew.
            self.changes[-1].fires = {"before": fires_before}
            self.fire_changes[job.pk] = self.changes[-1]
        if changed & Job.SCHEDULE_FIELDS:
            self.jobs_to_reschedule.add(job.pk)

    def fires_of(self, job):
        """The job's next fire instants after `now`, counted as the loop
        counts them (Job.upcoming); [None] when its schedule cannot be read."""
        try:
            return job.upcoming(self.now, PLANNED_FIRES)
        except (ScheduleError, RulesError, ValueError):
            return [None]

    # Prune, reschedule, audit

    def prune(self):
        """Delete what this file (its source) manages and no longer lists;
        rows of other files, and those made or adopted through the API or
        the admin, stay."""
        managed = {"managed_by": ManagedBy.APPLY, "managed_source": self.managed_source}
        unlisted_jobs = Job.objects.filter(**managed)
        for job in unlisted_jobs.exclude(name__in=self.job_names):
            # A copy keeps the pk that delete() clears: the event's target.
            target = copy.copy(job)
            self.record_change("job", job.name, job_state(job), None, target=target)
            job.delete()
        unlisted_groups = ConcurrencyGroup.objects.filter(**managed)
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
        unlisted_calendars = Calendar.objects.filter(**managed)
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

    def reschedule(self):
        jobs = Job.objects.filter(pk__in=self.jobs_to_reschedule) | jobs_on_calendars(
            self.touched_calendars
        )
        for job in jobs.select_related("calendar").distinct():
            job.reschedule(self.now)
            job.save(update_fields=["next_run_at", "updated_at"])
            if job.pk in self.fire_changes:
                self.fire_changes[job.pk].fires["after"] = self.fires_of(job)

    def audit(self):
        for change in self.changes:
            if change.action == "unchanged":
                continue
            verb = {"create": "created", "update": "changed", "delete": "deleted"}[change.action]
            audit.record(
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

    # Helpers

    def check_items(self, key, items, allowed):
        """[(where, item)] for well-formed items; errors for the others."""
        good, seen = [], set()
        for index, item in enumerate(items):
            where = f"{key}[{index}]"
            problem = item_problem(where, item, allowed)
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

    def record_change(self, kind, name, before, after, mask=masked_diff, target=None):
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
