"""Template helpers: instants as <time> elements, durations, state badges."""

import json
from datetime import UTC, timedelta

from django import template
from django.utils.html import format_html

from dashboard.charts import format_seconds

register = template.Library()


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
def as_json(value):
    return json.dumps(value, sort_keys=True, default=str)
