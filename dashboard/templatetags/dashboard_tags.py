"""Template helpers: instants as <time> elements, durations, state badges,
and whether the user may use a button."""

import json
from datetime import UTC, timedelta

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from audit import permissions
from dashboard.charts import format_seconds
from runners import coverage
from scheduler.models import Execution

register = template.Library()


@register.filter
def may(user, action):
    """`{% if request.user|may:"job.run" %}`: show only the buttons the user
    may use (the views refuse the others with 403 all the same)."""
    return permissions.allows(user, action)


@register.simple_tag
def when(value, empty="—"):
    """A UTC instant as <time>: the script shows it in the viewer's timezone
    and the title keeps the UTC value for hovering."""
    if value is None:
        return empty
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        utc.isoformat().replace("+00:00", "Z"),
        text,
        text,
    )


@register.simple_tag
def job_time(job, value, empty="—"):
    """A fire time on the job's own clock, with UTC beside it. The script
    leaves it as it is (data-job-zone): `0 9 * * 1-5` in Europe/Berlin reads
    09:00 wherever the viewer sits; the title keeps the full UTC value."""
    if value is None:
        return empty
    wall, utc_text = job.wall_and_utc(value)
    html = format_html(
        '<time datetime="{}" data-job-zone="{}" title="{}">{}</time>',
        value.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        job.timezone,
        utc(value),
        wall,
    )
    if utc_text:
        html += format_html(' <span class="muted utc">({})</span>', utc_text)
    return html


@register.filter
def seconds(value):
    """A timedelta (or seconds) in a short human form."""
    if value is None or value == "":
        return "—"
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return format_seconds(float(value))


@register.simple_tag
def state(value, label=None):
    return format_html('<span class="state state-{}">{}</span>', value, label or value)


@register.filter
def utc(value):
    """An instant as plain UTC text, for title attributes."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def ago(age):
    """A timedelta as "17 s ago" (dashboard.js keeps it up to date)."""
    return coverage.ago(age)


@register.filter
def as_json(value):
    return json.dumps(value, sort_keys=True, default=str)


@register.simple_tag
def result_strip(runs):
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


TARGET_PAGES = {
    "scheduler.job": lambda event: reverse("dashboard:job", args=[event.target_repr]),
    "scheduler.execution": lambda event: reverse("dashboard:execution", args=[event.target_id]),
    "runners.runner": lambda event: reverse("dashboard:runners"),
}


@register.simple_tag
def audit_target(event):
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
