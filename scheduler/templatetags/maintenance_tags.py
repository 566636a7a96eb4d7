"""`{% maintenance_banner %}`: the line the admin and the dashboard show
while a maintenance is in force (scheduler.runs.maintenance.banner)."""

from django import template
from django.utils import timezone

from scheduler.runs import maintenance

register = template.Library()


@register.inclusion_tag("scheduler/maintenance_banner.html")
def maintenance_banner() -> dict[str, str | None]:
    return {"text": maintenance.current_banner(timezone.now())}
