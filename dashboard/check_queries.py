"""What the dashboard's check pages read and show (docs/design.md §12): the
checks by state, a check's recent pings, a ping's body as a page may show
it, and the job admin's add form prefilled from a check ("Run it in Croniq
instead")."""

import re
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, QuerySet
from django.urls import reverse

from checks import states
from checks.models import Check, Ping
from dashboard import queries
from scheduler.jobs.cron import ScheduleError, describe

CHECKS_PER_PAGE = 50
PINGS_PER_PAGE = 50
# C0 controls but tab and newline, DEL and the C1 controls: a terminal's
# escape sequences and bells in a log are shown as their \x escapes, never
# passed to the browser as they are.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def state_counts(checks: QuerySet | None = None) -> dict[str, int]:
    """{state: `checks` in it (every check by default)}, every state present
    (one grouped query)."""
    checks = Check.objects.all() if checks is None else checks
    counted = dict(checks.values_list("state").annotate(n=Count("pk")).order_by())
    return {state: counted.get(state, 0) for state in states.STATES}


def checks_page(number: int, state: str, checks: QuerySet | None = None) -> queries.Page:
    rows: QuerySet[Check] = (Check.objects.all() if checks is None else checks).order_by("name")
    if state:
        rows = rows.filter(state=state)
    page = queries.cheap_page(rows, number, CHECKS_PER_PAGE)
    for check in page.items:
        check.timing_words = timing_words(check)
        check.grace_text = every_text(check.grace)
    return page


def pings_page(check: Check, number: int) -> queries.Page:
    """The check's pings, newest first (the `ping_check_n` index)."""
    rows = Ping.objects.filter(subject=check).order_by("-n")
    page = queries.cheap_page(rows, number, PINGS_PER_PAGE)
    for ping in page.items:
        ping.shown_body = shown_body(ping.body)
        ping.outcome = outcome(ping)
    return page


def outcome(ping: Ping) -> str:
    """The badge of a ping: an exit status is a success or a failure."""
    if ping.kind == states.EXIT:
        return states.SUCCESS if ping.exit_status == 0 else states.FAIL
    return ping.kind


def timing_words(check: Check) -> str:
    """When the check expects pings, in words."""
    if check.period is not None:
        return f"every {every_text(check.period)}"
    try:
        return describe(check.schedule, key=check.name)
    except ScheduleError:
        return check.schedule


def every_text(seconds: int) -> str:
    """Whole seconds in `@every`'s grammar: 300 -> "5m", 5400 -> "1h30m"."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"


def shown_body(body: str) -> str:
    """A ping's body as a page shows it (the template escapes it as HTML):
    bytes that were not UTF-8 were stored as U+FFFD already
    (`checks.pings.body_text`); control characters show as `\\x1b`."""
    return CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", body)


def job_add_url(check: Check) -> str:
    """The job admin's add form, prefilled from `check` (Django's admin takes
    a form's initial values from the query string): its name, description,
    and its schedule and timezone, or `@every <period>` for a check timed by
    a period. The command is the operator's to write."""
    schedule = check.schedule or f"@every {every_text(check.period or 0)}"
    initial: dict[str, Any] = {
        "name": check.name,
        "schedule": schedule,
        "timezone": check.timezone,
        "description": check.description,
    }
    return reverse("admin:scheduler_job_add") + "?" + urlencode(initial)
