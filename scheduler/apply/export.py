"""`croniq-admin export`: the whole configuration as one apply document
(docs/design.md §5, §16): calendars, concurrency groups, jobs, and the
sections apps add (notification channels and rules). Applying it to an
empty database makes the same configuration; a dry run of it against
either database plans no change.

Each item is written from the picture apply compares a row with
(`scheduler.apply.items.job_state`, ...), in the order of apply's field
lists and without the fields at their default, so what apply reads back is
what is stored, and the document stays short. Only configuration: no
executions, runners, fire times, pauses, health or audit. A channel's
secrets are the references it stores, never their values. A job's `env`
is written as stored (the export must recreate the job), and values named
like secrets are warned about, so nobody commits them unawares.

Rows are sorted by name here, not by the database's collation (PostgreSQL's
locale order is not SQLite's), so the same configuration exports to the
same text on either backend, and two exports diff cleanly.
"""

import datetime as dt
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.db.models import QuerySet
from django.utils import timezone

from audit.changes import (
    is_header_reference,
    is_secret_env,
    is_secret_header,
    is_store_reference,
)
from calendars.models import Calendar, CalendarPeriod
from core import db
from croniq_runner.sizes import written
from projects.models import DEFAULT as DEFAULT_PROJECT
from projects.models import Project
from scheduler.apply.fields import (
    CALENDAR_FIELDS,
    CONTAINER_FIELDS,
    GROUP_FIELDS,
    HTTP_FIELDS,
    JOB_FIELDS,
    JOB_SIZES,
    PERIOD_FIELDS,
    REQUIRED,
    Field,
)
from scheduler.apply.items import group_state, job_state
from scheduler.apply.sections import added_sections
from scheduler.jobs.schedules.union import parse_instant
from scheduler.models import ConcurrencyGroup, Job

# Which rows an export reads: a function narrowing each query.
Selection = Callable[[QuerySet], QuerySet]

HEADER = """\
# Croniq's configuration, written by `croniq-admin export`. Apply it with
# `croniq-admin apply FILE --source NAME`. Channel secrets are references;
# job env values are as stored. No runs, runners, pauses or audit trail.
"""

# `singleton: true` is the older name of `overlap: skip` (docs/design.md §10):
# the export writes the overlap policy alone, from which apply sets it.
OLDER_NAMES = {"jobs": {"singleton"}}


def everything(rows: QuerySet) -> QuerySet:
    """The selection of a whole export."""
    return rows


def one_project(name: str) -> Selection:
    """The selection of `export --project NAME`: that project's rows."""
    return lambda rows: rows.filter(project=name)


def in_project(item: dict[str, Any], row: Any) -> dict[str, Any]:
    """`item` with its row's `project` after its name, unless `default`:
    an export applied elsewhere puts each row back in its project."""
    if row.project == DEFAULT_PROJECT:
        return item
    name, rest = item["name"], {k: v for k, v in item.items() if k != "name"}
    return {"name": name, "project": row.project, **rest}


class ExportError(Exception):
    pass


@dataclass
class Export:
    document: dict[str, Any]
    # What the person exporting should know (stderr): secret-looking env
    # values written out, pauses not carried.
    warnings: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The document as YAML, after a short header comment."""
        return HEADER + dumped(self.document)


def export(
    select: Selection = everything, now: dt.datetime | None = None, project: str | None = None
) -> Export:
    """The configuration `select` picks, read from one snapshot (a row
    changed meanwhile cannot leave a job naming a calendar the document
    lacks), as an apply document, at `now` (default: the clock's); ExportError
    when an app's section cannot be exported. With `project`, that project's
    rows alone, under `project:` at the top; the document declares the
    projects it names (`projects:`), so it applies to a new database."""
    now = now or timezone.now()
    if project is not None:
        select = one_project(project)
    with db.snapshot():
        declared = Project.objects.exclude(name=DEFAULT_PROJECT)
        if project is not None:
            declared = declared.filter(name=project)
        calendars = by_name(select(Calendar.objects.select_related("base")))
        periods = periods_by_calendar(select)
        groups = by_name(select(ConcurrencyGroup.objects.all()))
        jobs = by_name(select(Job.objects.select_related("calendar", "concurrency_group")))
        warnings: list[str] = []
        done = [job for job in jobs if one_shots_gone_by(job, now)]
        sections = {
            "projects": [project_item(p) for p in declared],
            "calendars": [
                in_project(calendar_item(c, periods.get(c.pk, [])), c) for c in calendars
            ],
            "concurrency_groups": [in_project(group_item(g), g) for g in groups],
            "jobs": [in_project(job_item(j, now), j) for j in jobs if j not in done],
        }
        for keys, factory in added_sections():
            exported = getattr(factory, "export", None)
            if exported is None:
                raise ExportError(
                    f"the {', '.join(keys)} section(s) cannot be exported: "
                    f"{factory.__qualname__} has no export()"
                )
            sections.update(exported(select))
            # What the person exporting should know of the section (its pauses).
            warned = getattr(factory, "export_warnings", None)
            if warned is not None:
                warnings += warned(select)
    document: dict[str, Any] = {key: items for key, items in sections.items() if items}
    if project is not None:
        document = {"project": project, **document}
    warnings = [
        *secret_env_warnings(jobs),
        *secret_header_warnings(jobs),
        *secret_container_env_warnings(jobs),
        *pause_warnings(jobs),
        *done_warnings(done),
        *warnings,
    ]
    return Export(document, warnings)


def by_name(rows: Iterable[Any]) -> list[Any]:
    return sorted(rows, key=lambda row: row.name)


def as_item(
    fields: tuple[Field, ...], values: dict[str, Any], older: Collection[str] = ()
) -> dict[str, Any]:
    """An apply item: `values` in the order of `fields`, leaving out those
    at their default and the `older` names of fields written otherwise. A
    field `values` lacks is a KeyError: an apply field the export does not
    write would otherwise vanish from every backup."""
    return {
        f.name: values[f.name]
        for f in fields
        if f.name not in older and (f.default is REQUIRED or values[f.name] != f.default)
    }


# -- the built-in sections ---------------------------------------------------------


def periods_by_calendar(select: Selection) -> dict[int, list[CalendarPeriod]]:
    calendars = select(Calendar.objects.all())
    periods = CalendarPeriod.objects.filter(calendar__in=calendars)
    found = {}
    for period in periods:
        found.setdefault(period.calendar_id, []).append(period)
    return found


def calendar_item(calendar: Calendar, periods: list[CalendarPeriod]) -> dict[str, Any]:
    nested = {f.name: f.fields for f in CALENDAR_FIELDS}
    holidays = None
    if calendar.holiday_country:
        holidays = as_item(
            nested["holidays"],
            {
                "country": calendar.holiday_country,
                "subdivision": calendar.holiday_subdivision,
                "categories": list(calendar.holiday_categories),
            },
        )
    window = None
    if calendar.window_start is not None and calendar.window_end is not None:
        window = as_item(
            nested["daily_window"],
            {"start": clock(calendar.window_start), "end": clock(calendar.window_end)},
        )
    values = {
        "name": calendar.name,
        "description": calendar.description,
        "timezone": calendar.timezone,
        "weekdays": list(calendar.weekdays),
        "holidays": holidays,
        "daily_window": window,
        "base": calendar.base.name if calendar.base is not None else None,
    }
    for kind in (CalendarPeriod.EXCLUDE, CalendarPeriod.INCLUDE):
        values[kind] = [period_item(p) for p in sorted_periods(periods, kind)]
    return as_item(CALENDAR_FIELDS, values)


def sorted_periods(periods: list[CalendarPeriod], kind: str) -> list[CalendarPeriod]:
    """The periods of `kind` by start, end and label, however they were stored."""
    return sorted(
        (p for p in periods if p.kind == kind), key=lambda p: list(period_item(p).values())
    )


def period_item(period: CalendarPeriod) -> dict[str, Any]:
    """A period as written: dates (whole days, end inclusive) or instants
    with their offset (end exclusive), as ISO 8601 text."""
    if period.start_date is not None:
        start, end = period.start_date.isoformat(), period.end_date.isoformat()
    else:
        start, end = period.start_at.isoformat(), period.end_at.isoformat()
    return as_item(PERIOD_FIELDS, {"start": start, "end": end, "label": period.label})


def clock(time: dt.time) -> str:
    """A time of day as `"HH:MM"`, with seconds only when it has them."""
    return time.isoformat(timespec="minutes" if not (time.second or time.microsecond) else "auto")


def project_item(project: Project) -> dict[str, Any]:
    item = {"name": project.name}
    if project.description:
        item["description"] = project.description
    return item


def group_item(group: ConcurrencyGroup) -> dict[str, Any]:
    return as_item(GROUP_FIELDS, {"name": group.name, **group_state(group)})


def job_item(job: Job, now: dt.datetime) -> dict[str, Any]:
    values = {"name": job.name, **job_state(job)}
    # Sorted: PostgreSQL's jsonb keeps its own key order, SQLite the one written.
    values["env"] = dict(sorted(values["env"].items()))
    if values["http"] is not None:
        request = {**values["http"], "headers": dict(sorted(values["http"]["headers"].items()))}
        values["http"] = as_item(HTTP_FIELDS, request)
    if values["container"] is not None:
        spec = {**values["container"], "env": dict(sorted(values["container"]["env"].items()))}
        values["container"] = as_item(CONTAINER_FIELDS, spec)
    # One-shot instants still to come: a past one has fired (or was missed),
    # and apply refuses a past instant a job does not have, so with it the
    # export would not apply into an empty database (a restore).
    values["at"] = [text for text in values["at"] if parse_instant(text) > now]
    # Sizes as people write them (64MiB), which apply reads back as the same bytes.
    for key in JOB_SIZES:
        if values[key] is not None:
            values[key] = written(values[key])
    return as_item(JOB_FIELDS, values, OLDER_NAMES["jobs"])


# -- what the person exporting is told ---------------------------------------------


def secret_env_warnings(jobs: list[Job]) -> list[str]:
    """One warning per job whose `env` has values named like secrets
    (`*_TOKEN`, `*_PASSWORD`, `*_SECRET`, `*_KEY`): the export writes them
    out, as it must to recreate the job."""
    warnings = []
    for job in jobs:
        names = sorted(k for k, v in job.env.items() if is_secret_env(k) and v not in ("", None))
        if names:
            are, look = (
                ("is", "looks like a secret") if len(names) == 1 else ("are", "look like secrets")
            )
            warnings.append(
                f"job {job.name}: env {', '.join(names)} {are} written out as stored and "
                f"{look}: do not commit the file as it is"
            )
    return warnings


def secret_header_warnings(jobs: list[Job]) -> list[str]:
    """One warning per http job whose request has headers named like
    secrets (`Authorization`, `X-Api-Key`, ...) holding more than a
    `${secret:NAME}` reference: the export writes them out as stored."""
    warnings = []
    for job in jobs:
        headers = (job.http or {}).get("headers") or {}
        names = sorted(n for n, v in headers.items() if is_secret_header(n) and bare_secret(v))
        if names:
            are, look = (
                ("is", "looks like a secret") if len(names) == 1 else ("are", "look like secrets")
            )
            warnings.append(
                f"job {job.name}: http header {', '.join(names)} {are} written out as stored "
                f"and {look}: do not commit the file as it is (or write ${{secret:NAME}} instead)"
            )
    return warnings


def secret_container_env_warnings(jobs: list[Job]) -> list[str]:
    """One warning per container job whose container's env has values named
    like secrets holding more than a `${secret:NAME}` reference: the
    export writes them out as stored."""
    warnings = []
    for job in jobs:
        env = (job.container or {}).get("env") or {}
        names = sorted(
            k
            for k, v in env.items()
            if is_secret_env(k) and v not in ("", None) and not is_store_reference(v)
        )
        if names:
            are, look = (
                ("is", "looks like a secret") if len(names) == 1 else ("are", "look like secrets")
            )
            warnings.append(
                f"job {job.name}: container env {', '.join(names)} {are} written out as stored "
                f"and {look}: do not commit the file as it is (or write ${{secret:NAME}} instead)"
            )
    return warnings


def bare_secret(value: Any) -> bool:
    """Whether a secret-looking header's value is written out as itself: not
    empty, and no `${secret:NAME}` reference to the secrets store."""
    return value not in ("", None) and not is_header_reference(value)


def one_shots_gone_by(job: Job, now: dt.datetime) -> bool:
    """Whether the job fires only at one-shot instants, all gone by: it never
    fires again, and without them its item would have nothing to fire at
    (apply refuses a job without a schedule, and the instants as new ones)."""
    if job.schedule or job.schedules or not job.at or job.run_on_register or job.webhook:
        return False
    return all(parse_instant(text) <= now for text in job.at)


def done_warnings(done: list[Job]) -> list[str]:
    if not done:
        return []
    return [
        "left out: jobs whose one-shot instants (at) have all passed and that have no "
        f"schedule, so never fire again: {', '.join(job.name for job in done)}; "
        "their runs stay in this database (applied with --prune, the document deletes them)"
    ]


def pause_warnings(jobs: list[Job]) -> list[str]:
    """Paused jobs: a pause is an operator's action, which apply leaves as it
    is (docs/design.md §10), so the document does not carry it, and a job
    applied from it to a new database is not paused."""
    paused = [job.name for job in jobs if job.paused_at is not None]
    if not paused:
        return []
    return [
        "paused here, not in the document (a pause is an operator's state, which apply "
        f"leaves alone): {', '.join(paused)}; applied to a new database, they are not paused"
    ]


# -- YAML ---------------------------------------------------------------------------


# Line breaks YAML knows besides "\n", and the byte order mark: PyYAML's own
# emitter writes them raw outside double quotes, and reads them back as a space.
ESCAPED = frozenset("\x85\u2028\u2029\ufeff")


def represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    if ESCAPED.intersection(text):
        style = '"'
    elif "\n" in text:
        style = "|"  # where the text allows it; quoted otherwise (trailing spaces...)
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


def represent_list(dumper: yaml.SafeDumper, items: list[Any]) -> yaml.SequenceNode:
    # A list of words on one line, as people write them: [mon, tue, wed].
    flow = all(isinstance(i, str | int | float) for i in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)


def dumper_on(base: type[yaml.SafeDumper]) -> type[yaml.SafeDumper]:
    """A dumper writing YAML apply reads back: no anchors or aliases (apply
    refuses them, and PyYAML writes them for an object met twice), and
    text over several lines as a block where that keeps it exact."""

    class Dumper(base):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    Dumper.add_representer(str, represent_text)
    Dumper.add_representer(list, represent_list)
    return Dumper


# On libyaml's emitter (in PyYAML's wheels): 5,000 jobs take a quarter of
# the time of PyYAML's own, which writes the same document (but for
# characters beyond U+FFFF, which it escapes).
Dumper = dumper_on(getattr(yaml, "CSafeDumper", yaml.SafeDumper))


def dumped(document: dict[str, Any], dumper: type[yaml.SafeDumper] = Dumper) -> str:
    if not document:
        return "{}\n"
    return yaml.dump(
        document,
        Dumper=dumper,
        sort_keys=False,  # an item's fields in apply's order: name first
        allow_unicode=True,
        default_flow_style=False,
        width=1_000_000,  # a long command stays on its line: diffs show it whole
    )
