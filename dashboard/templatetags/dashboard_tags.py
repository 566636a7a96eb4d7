"""Template helpers: instants as <time> elements (core.instants' text), durations, state badges,
and whether the user may use a button."""

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from audit.models import AuditEvent
from core import instants, permissions
from dashboard import audit_details, palette_entries, seen
from dashboard.charts import DurationChart, HeatMap, HeatRow, format_seconds
from dispatch import liveness
from scheduler.forecast import Forecast, Span, Wait
from scheduler.models import Execution, Job

register = template.Library()


@register.filter
def may(user: Any, action: str) -> bool:
    """`{% if request.user|may:"runner.drain" %}`: show only the buttons the
    user may use (the views refuse the others with 403 all the same), for
    what no project holds (runners): the permission held globally."""
    return permissions.allows(user, action)


@register.simple_tag(takes_context=True)
def allowed(context: template.Context, action: str, target: Any) -> bool:
    """`{% allowed "job.run" job as may_run %}`: whether the user may do
    `action` to `target`, a row of a project: by the role in its project
    (read once per request), or globally."""
    return permissions.allows(context["request"].user, action, target)


@register.simple_tag(takes_context=True)
def pages_open(context: template.Context) -> set[str]:
    """`{% pages_open as shown %}`: the URL names of the pages the nav links
    that open to the user (a project's member: not the runners' pages)."""
    return seen.pages_open(context["request"].user, [name for _, name in palette_entries.PAGES])


@register.simple_tag
def filter_query(job_filter: Any, **changes: str) -> str:
    """`{% filter_query job_filter tag="billing" %}`: the overview's query
    string with one filter changed ("" drops it), the page left out."""
    return f"?{job_filter.query(**changes)}"


@register.simple_tag
def when(value: datetime | None, empty: str = "—") -> str:
    """An instant as <time>, in UTC as core.instants shows it: dashboard.js
    shows it in the viewer's timezone and labels it so, the title keeping
    the UTC value for hovering."""
    if value is None:
        return empty
    text = utc(value)
    return format_html(
        '<time datetime="{}" title="{}" data-zone="viewer">{}</time>', iso(value), text, text
    )


@register.simple_tag
def job_time(job: Job, value: datetime | None, empty: str = "—") -> str:
    """A fire time on the job's own clock, with UTC beside it. The script
    leaves it as it is (data-job-zone): `0 9 * * 1-5` in Europe/Berlin reads
    09:00 wherever the viewer sits; the title says whose clock it is and
    keeps the full UTC value."""
    if value is None:
        return empty
    wall, utc_text = job.wall_and_utc(value)
    html = format_html(
        '<time datetime="{}" data-job-zone="{}" title="{}">{}</time>',
        iso(value),
        job.timezone,
        f"{utc(value)}; shown in the job's zone ({job.timezone})",
        wall,
    )
    if utc_text:
        html += format_html(' <span class="muted utc">({})</span>', utc_text)
    return html


@register.filter
def seconds(value: timedelta | float | str | None) -> str:
    """A timedelta (or seconds) in a short human form."""
    if value is None or value == "":
        return "—"
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return format_seconds(float(value))


@register.simple_tag
def state(value: str, label: str | None = None) -> str:
    return format_html('<span class="state state-{}">{}</span>', value, label or value)


@register.filter
def utc(value: datetime | None) -> str:
    """An instant as plain UTC text (core.instants), for title attributes."""
    if value is None:
        return ""
    return instants.shown(value, UTC)


@register.filter
def ago(age: timedelta) -> str:
    """A timedelta as "17 s ago" (dashboard.js keeps it up to date)."""
    return liveness.ago(age)


@register.filter
def join_keys(value: dict[str, Any]) -> str:
    """A mapping's keys, sorted (PostgreSQL's jsonb keeps no order),
    comma-separated: an http job's header names, shown without their values."""
    return ", ".join(sorted(value))


@register.simple_tag
def event_details(event: AuditEvent) -> audit_details.Details:
    """`{% event_details event as details %}`: its changes and facts."""
    return audit_details.details(event.action, event.data)


@register.simple_tag
def result_strip(runs: Sequence[Any]) -> str:
    """The coloured cells of a job's recent runs, oldest left. Built in Python:
    the overview draws up to 1,000 of them and template loops are slow."""
    if not runs:
        return mark_safe('<span class="muted">no runs yet</span>')
    labels = dict(Execution.STATES)
    base = reverse("dashboard:execution", args=[0]).removesuffix("0/")
    cells = []
    for run in reversed(runs):
        title = f"{labels.get(run.state, run.state)} · {utc(run.scheduled_for)}"
        if run.attempt > 1:
            title += f" · attempt {run.attempt}"
        title = escape(title)
        cells.append(
            f'<a class="cell state-{escape(run.state)}" href="{base}{run.pk}/"'
            f' title="{title}" aria-label="{title}"></a>'
        )
    return mark_safe("".join(cells))  # noqa: S308 (every value above is escaped or an int)


@register.filter
def percent(value: float | None) -> str:
    """A share (0..1) as a percentage; "—" for none."""
    if value is None:
        return "—"
    return f"{value * 100:.1f} %"


@register.filter
def iso(value: datetime | None) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else ""


@register.simple_tag
def duration_points(chart: DurationChart) -> str:
    """The duration chart's points: a dot per run, a cross per failure, each
    linked to its run. Built in Python: up to 1,000 of them."""
    base = reverse("dashboard:execution", args=[0]).removesuffix("0/")
    labels = {state: escape(label) for state, label in Execution.STATES}
    shapes = []
    for point in chart.points:
        run = point.run
        state = escape(run.state)
        title = (
            f"<title>{format_seconds(run.seconds)} · {labels.get(run.state, state)}"
            f" · started {utc(run.started_at)}</title>"
        )
        if run.failed:
            x, y = point.x - 3, point.y - 3
            shape = (
                f'<path class="point failed state-{state}" data-failed'
                f' d="M{x:.2f} {y:.2f}l6 6m0 -6l-6 6">{title}</path>'
            )
        else:
            shape = (
                f'<circle class="point state-{state}" cx="{point.x}" cy="{point.y}"'
                f' r="2.5">{title}</circle>'
            )
        shapes.append(f'<a href="{base}{run.pk}/" data-run="{run.pk}">{shape}</a>')
    return mark_safe("".join(shapes))  # noqa: S308 (every value above is escaped or a number)


@register.simple_tag
def heat_cells(row: HeatRow, heatmap: HeatMap) -> str:
    """A heat-map row's cells, coloured by their level (charts.heat_level)."""
    cells = []
    for cell in row.cells:
        title = escape(
            f"{cell.start:%H}:00–{cell.start.hour + 1:02}:00 UTC: "
            f"{cell.failed} failed of {cell.total}" + (f" ({cell.share:.0%})" if cell.total else "")
        )
        cells.append(
            f'<rect class="heat heat-{cell.level}" x="{cell.x + 1}" y="{row.y + 1}"'
            f' width="{heatmap.cell - 2}" height="{heatmap.row_height - 2}" rx="2"'
            f' data-failed="{cell.failed}" data-total="{cell.total}">'
            f"<title>{title}</title></rect>"
        )
    return mark_safe("".join(cells))  # noqa: S308 (every value above is escaped or a number)


TARGET_PAGES = {
    "scheduler.job": lambda event: reverse("dashboard:job", args=[event.target_repr]),
    "scheduler.execution": lambda event: reverse("dashboard:execution", args=[event.target_id]),
    "runners.runner": lambda event: reverse("dashboard:runners"),
}


@register.simple_tag
def audit_target(event: AuditEvent) -> str:
    """An audit event's target, linked to its dashboard page when it has one."""
    if not event.target_type:
        return ""
    page = TARGET_PAGES.get(event.target_type)
    try:
        url = page(event) if page else None
    except NoReverseMatch:  # e.g. a job renamed to something that is no slug
        url = None
    if url is None:
        return format_html('<span class="muted">{}</span> {}', event.target_type, event.target_repr)
    return format_html(
        '<span class="muted">{}</span> <a href="{}">{}</a>',
        event.target_type,
        url,
        event.target_repr,
    )


@register.simple_tag
def label_set(labels: Iterable[str] | None) -> str:
    """A job label set as code, or "any runner" for jobs that ask for none."""
    if not labels:
        return mark_safe('<span class="label-set">any runner</span>')  # noqa: S308 (constant)
    return format_html('<code class="label-set">{}</code>', ", ".join(labels))


@register.simple_tag
def start_delay(wait: Wait, forecast: Forecast) -> str:
    """ "2026-12-01 02:00:00 UTC – 2026-12-01 02:15:00 UTC: 2 runs at once on
    `linux`, 1 slot online: a run starts up to 44.0 s late", a quarter hour of
    the forecast (scheduler.forecast.Wait) where runs queue for a slot."""
    return format_html(
        "{} – {}: {} runs at once on {}, {} slot{} online: a run starts up to "
        '<span data-delay="{}">{} late</span>',
        when(forecast.start_of(wait.bucket)),
        when(forecast.start_of(wait.bucket + 1)),
        wait.peak,
        label_set(wait.labels),
        wait.capacity,
        "" if wait.capacity == 1 else "s",
        f"{wait.delay:.3f}" if wait.delay is not None else "",
        seconds(wait.delay),
    )


@register.simple_tag
def over_capacity(span: Span) -> str:
    """ "2026-12-01 02:00:00 UTC – 2026-12-01 02:15:00 UTC: 14 slots needed
    on `linux`, 8 online", a span of the capacity forecast
    (scheduler.forecast.Span), its instants in the viewer's zone as every
    other (the forecast spans days: a time of day alone would not say which)."""
    return format_html(
        '{} – {}: <span title="{} runs at once at the peak">{} slot{} needed</span>'
        " on {}, {} online",
        when(span.start),
        when(span.end),
        f"{span.peak:.1f}",
        span.slots_needed,
        "" if span.slots_needed == 1 else "s",
        label_set(span.labels),
        span.capacity,
    )
