"""Jobs and calendars as code: `manage.py apply FILE` (docs/design.md §5).

The whole file is validated, reading only, and then applied in one short
transaction: a bad item means nothing is written, and errors name the item
and field ("jobs[3].schedule: ..."). Applying the same file twice changes
nothing. Documents are bounded (MAX_DOCUMENT_CHARS, MAX_ITEMS) and YAML
anchors and aliases are refused.

Apps above the scheduler add top-level sections of their own (the
notifications app: `channels` and `notify`, docs/design.md §9) with
`add_sections`, so the scheduler reads them without importing those apps,
and their items are applied in the same transaction as jobs and calendars.
"""

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError

from audit.changes import masked_diff
from audit.recording import event_of, record_many
from calendars.models import Calendar, CalendarPeriod, ManagedBy
from calendars.rules import RulesError
from calendars.validators import text_problems
from scheduler.apply.items import (
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
from scheduler.firing import job_edits
from scheduler.jobs import chain_graph
from scheduler.jobs.calendar_changes import jobs_on_calendars
from scheduler.jobs.cron import ScheduleError, never_fires_reason
from scheduler.models import ConcurrencyGroup, Job

BUILT_IN_SECTIONS = ("calendars", "concurrency_groups", "jobs")
# The largest document read, in characters (a file: in bytes), as a file
# or over HTTP (the API's body limit, Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
# is the same 2.5 MB): a bound on the work and memory one apply takes.
MAX_DOCUMENT_CHARS = 2_621_440
# Items one document may hold, per section (any other: MAX_OTHER_ITEMS): a
# bound on the time an apply takes, its plan and its one write transaction.
MAX_ITEMS = {"jobs": 5_000, "calendars": 1_000, "concurrency_groups": 1_000}
MAX_OTHER_ITEMS = 1_000
# The safe loader, in C when PyYAML was built with libyaml.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# How many fire times the plan shows before and after a schedule change.
PLANNED_FIRES = 5
# Plans made again when rows they read changed before they were written.
PLAN_ATTEMPTS = 3
# Names read in one query (SQLite binds at most 32,766 parameters).
LOOKUP_BATCH = 500
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
        items = document.get(key) or []
        if not isinstance(items, list):
            raise ApplyError(f"{key}: expected a list")
        limit = MAX_ITEMS.get(key, MAX_OTHER_ITEMS)
        if len(items) > limit:
            raise ApplyError(f"{key}: at most {limit:,} items in one document, got {len(items):,}")
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

    Every item is checked and the plan made first, reading only (on SQLite
    a write transaction holds the database's write lock, and every tick,
    heartbeat and finish waits behind it); then one short transaction
    writes what changes. A row another writer changed between the two is
    never overwritten: the plan is made again (at most PLAN_ATTEMPTS times).
    """
    for _attempt in range(PLAN_ATTEMPTS):
        applier = Applier(now=now, actor=actor, source=source, managed_source=managed_source)
        applier.plan(document)
        if applier.errors:
            # Refused before any write: the write lock is never taken for it.
            raise ApplyError(applier.errors)
        try:
            return applier.write(document, prune=prune, dry_run=dry_run)
        except Conflict:
            continue
    raise ApplyError(
        f"nothing applied: rows this document changes were changed by someone else "
        f"{PLAN_ATTEMPTS} times while it was applied; apply it again"
    )


def apply_item(kind, item, *, now, actor, managed_by, via, source=""):
    """Check and write one job or calendar (`kind`) as apply would, marked
    `managed_by`; returns its Change. ApplyError names the field
    ("schedule: ..."). The management API's writes: one item, no file."""
    problem = item_problem("", item, {"job": JOB_KEYS, "calendar": CALENDAR_KEYS}[kind])
    if problem:
        raise ApplyError(relative_errors([problem]))
    applier = Applier(now=now, actor=actor, source=source, managed_by=managed_by, via=via)
    plan_item = applier.apply_job if kind == "job" else applier.apply_calendar
    # One row: planned and written in one transaction, which reads it again.
    with transaction.atomic():
        try:
            plan_item("", item)
        except (ValidationError, ApplyError) as e:
            raise ApplyError(item_errors(e)) from None
        applier.write_rows()
        applier.check_chains()
        if applier.errors:
            raise ApplyError(relative_errors(applier.errors))
        applier.reschedule()
        applier.audit()
    return applier.changes[-1]


def batched(items, size):
    """`items` in lists of at most `size`."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def unsaved_in_chain(calendar):
    """Whether `calendar`'s base chain holds a calendar not yet created."""
    seen = set()
    base = calendar.base
    while base is not None and id(base) not in seen:
        if base.pk is None:
            return True
        seen.add(id(base))
        base = base.base
    return False


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


class Conflict(Exception):
    """A row the plan read was changed before the plan was written."""


@dataclass
class Write:
    """One row the plan writes: created, or updated in `fields` when its
    `updated_at` is still `version` (what the plan read)."""

    row: object
    fields: list = None  # None: a new row
    version: object = None
    periods: list = None  # a calendar's, replacing those it had


class Applier:
    """Checks and writes items; what it creates or updates is marked
    `managed_by` (apply: "apply"; the management API, one item at a time: "api").

    The apply_* methods check items and plan their writes, reading only;
    `write` (or `write_rows`) then writes them."""

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
        self.writes = []  # [Write] in the order they are made
        # Rows as this document makes them, by name: what later items refer to.
        self.planned_calendars = {}
        self.planned_groups = {}
        self.stored_jobs = {}  # name: the job as stored, read once for all items
        self.rules = {}  # calendar name: its CalendarRules as this document makes them
        self.touched_calendars = []  # calendars whose rules this document changes
        self.jobs_to_reschedule = []
        self.fire_changes = {}  # job name: its Change, whose fire times moved

    def plan(self, document):
        """Check every item and plan its writes, reading only."""
        self.apply_calendars(document.get("calendars") or [])
        self.apply_groups(document.get("concurrency_groups") or [])
        self.apply_jobs(document.get("jobs") or [])

    def write(self, document, *, prune, dry_run):
        """Write the plan in one transaction, with the sections apps add,
        and return the Changes; Conflict when a row planned was changed
        since it was read, ApplyError when an item is wrong."""
        try:
            with transaction.atomic():
                added = [(keys, factory(self)) for keys, factory in _sections]
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

    def write_rows(self):
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

    def schedule_new(self, job):
        """A new job's first fire time, as Job.reschedule computes it (a new
        job has no execution to withdraw), from its calendar as planned."""
        if job.calendar is not None:
            job.calendar = job.calendar  # its id, set once a new calendar is written
            job._calendar_rules = (job.calendar_id, self.rules_of(job.calendar))
        job.next_run_at = job.next_fire_after(self.now) if job.is_active else None

    def check_versions(self):
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
        values = calendar_values(where, item, self.calendar_named)
        periods = [period_values(f"{where}.{k}[{i}]", k, p) for k, i, p in periods_of(where, item)]
        calendar = Calendar.objects.filter(name=item["name"]).first()
        before = calendar_state(calendar) if calendar else None
        version = calendar.updated_at if calendar else None
        calendar = calendar or Calendar(name=item["name"])
        for key, value in values.items():
            setattr(calendar, key, value)
        calendar.managed_by = self.managed_by
        calendar.managed_source = self.managed_source
        # A base chain through calendars still to be created is checked for
        # cycles by `order_by_base`: unsaved, they have no pk to compare.
        calendar.full_clean(exclude=["base"] if unsaved_in_chain(calendar) else None)
        planned_periods = [CalendarPeriod(calendar=calendar, **p) for p in periods]
        for period in planned_periods:
            period.full_clean(exclude=["calendar"])
        after = calendar_state(calendar, planned_periods)
        self.planned_calendars[calendar.name] = calendar
        self.rules[calendar.name] = self.planned_rules(calendar, planned_periods)
        if before != after:
            fields = None if version is None else [*values, "managed_by", "managed_source"]
            fields = fields and [*fields, "updated_at"]
            self.writes.append(Write(calendar, fields, version, periods))
            if version is not None:  # a new calendar has no jobs but this document's new ones
                self.touched_calendars.append(calendar)
        self.record_change("calendar", calendar.name, before, after, target=calendar)

    def calendar_named(self, name):
        """The calendar `name` as this document makes it, else as stored, or None."""
        if name in self.planned_calendars:
            return self.planned_calendars[name]
        return Calendar.objects.filter(name=name).first()

    def planned_rules(self, calendar, periods):
        """The CalendarRules of `calendar` with `periods`, its base as this
        document makes it: what the jobs on it are checked against."""
        base = None
        if calendar.base is not None:
            base = self.rules_of(calendar.base)
        return calendar.rules_with(periods, base)

    def rules_of(self, calendar):
        """The CalendarRules of `calendar`, read once per apply; a calendar
        the document does not list is read as stored, on its base as planned."""
        if calendar.name not in self.rules:
            periods = list(calendar.periods.all())
            self.rules[calendar.name] = self.planned_rules(calendar, periods)
        return self.rules[calendar.name]

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
        version = group.updated_at if group else None
        group = group or ConcurrencyGroup(name=item["name"])
        group.max_concurrent = budget
        group.description = item.get("description") or ""
        group.managed_by = self.managed_by
        group.managed_source = self.managed_source
        group.full_clean()
        after = group_state(group)
        self.planned_groups[group.name] = group
        if before != after:
            fields = None if version is None else [*after, "updated_at"]
            self.writes.append(Write(group, fields, version))
        self.record_change("concurrency_group", group.name, before, after, target=group)

    def group_named(self, name):
        if name in self.planned_groups:
            return self.planned_groups[name]
        return ConcurrencyGroup.objects.filter(name=name).first()

    # Jobs

    def apply_jobs(self, items):
        checked = self.check_items("jobs", items, JOB_KEYS)
        self.read_jobs([item["name"] for _, item in checked])
        for where, item in checked:
            self.job_names.append(item["name"])
            try:
                self.apply_job(where, item)
            except ValidationError as e:
                self.errors.extend(describe_errors(where, e))
            except ApplyError as e:
                self.errors.extend(e.errors)
        self.check_chains()

    def read_jobs(self, names):
        """The stored jobs of these names, read in a few queries, not one each."""
        rows = Job.objects.select_related("calendar", "concurrency_group")
        for chunk in batched(names, LOOKUP_BATCH):
            self.stored_jobs.update((job.name, job) for job in rows.filter(name__in=chunk))

    def stored_job(self, name):
        if name not in self.stored_jobs:
            self.read_jobs([name])
        return self.stored_jobs.get(name)

    def check_chains(self):
        """The chains of the jobs planned, against every job as it stands
        (this document's included): a missing job or a cycle is an error
        naming the item and field. Read in one query; inside the write,
        under the chain graph's lock (`chain_graph.lock`), so a chain
        another writer stored since the plan is seen."""
        if not self.chained:
            return
        if connection.in_atomic_block and any(
            j.on_success or j.on_failure for _, j in self.chained
        ):
            chain_graph.lock()
        stored = Job.objects.values_list("name", *chain_graph.FIELDS)
        graph = {name: (s or [], f or []) for name, s, f in stored}
        graph.update((job.name, (job.on_success, job.on_failure)) for _, job in self.chained)
        for where, job in self.chained:
            job.defer_chain_check = False
            for key, message in job.chain_problems(graph).items():
                self.errors.append(f"{where}.{key}: {message}")
            job.defer_chain_check = True

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
        stored = self.stored_job(item["name"])
        before = job_state(stored) if stored else None
        job = copy.copy(stored) if stored else Job(name=item["name"])
        for key, value in values.items():
            setattr(job, key, value)
        job.calendar = calendar
        job.concurrency_group = group
        job.managed_by = self.managed_by
        job.managed_source = self.managed_source
        # Chains may name jobs later in the file: checked once all are planned.
        job.defer_chain_check = True
        rules = self.rules_of(calendar) if calendar is not None else None
        if calendar is not None and calendar.pk is not None:
            job._calendar_rules = (calendar.pk, rules)  # the calendar as planned
        job.full_clean()
        if calendar is not None and calendar.pk is None:
            self.check_fires(where, job, rules)  # full_clean could not: no calendar yet
        self.chained.append((where, job))
        after = job_state(job)
        changed = {k for k in after if before is None or before.get(k) != after[k]}
        moves_fires = before is not None and bool(changed & FIRE_FIELDS)
        if before is None:
            if calendar is None or calendar.pk is not None:
                self.schedule_new(job)  # now, not while the write holds the lock
            self.writes.append(Write(job))
        elif changed:
            # Only the fields the file changes: the scheduler's own fields
            # were read before the loop may have moved them on.
            self.writes.append(Write(job, [*sorted(changed), "updated_at"], stored.updated_at))
        self.record_change("job", job.name, before, after, target=job)
        if moves_fires:
            # As stored; "after" once rescheduled: an @every job's grid starts anew.
            self.changes[-1].fires = {"before": self.fires_of(stored)}
            self.fire_changes[job.name] = self.changes[-1]
        if before is not None and changed & Job.SCHEDULE_FIELDS:
            self.jobs_to_reschedule.append(job)

    def check_fires(self, where, job, rules):
        """The check full_clean makes of a job whose calendar is still to be
        created: its schedule must fire within the horizon."""
        reason = never_fires_reason(
            job.schedule,
            job.timezone,
            rules,
            self.now,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            policy=job.calendar_policy,
            key=job.name,
        )
        if reason:
            raise ValidationError({"schedule": reason})

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

    def audit(self):
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
