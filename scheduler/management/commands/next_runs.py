"""`manage.py next_runs JOB [--after ISO8601] [--count N] [--json]` (DESIGN.md §5)."""

import json
from datetime import UTC, datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from calendars.rules import RulesError, get_zone
from scheduler.cron import ScheduleError, never_fires_reason, next_fires
from scheduler.models import Job


class Command(BaseCommand):
    help = (
        "Print the next fire instants of a job strictly after --after (default: now), "
        "with its calendar and calendar policy applied."
    )

    def add_arguments(self, parser):
        parser.add_argument("job", help="Job name.")
        parser.add_argument(
            "--after",
            type=parse_after,
            help="ISO 8601 instant, e.g. 2026-12-24T09:00:00+01:00 (no offset means UTC).",
        )
        parser.add_argument("--count", type=positive_int, default=10, help="How many (10).")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print a JSON list."
        )

    def handle(self, *args, job, after, count, as_json, **options):
        found = Job.objects.select_related("calendar").filter(name=job).first()
        if found is None:
            raise CommandError(f"unknown job {job!r}", returncode=1)
        after = after or timezone.now()
        try:
            fires, reason = upcoming(found, after, count)
        except (ScheduleError, RulesError) as e:
            raise CommandError(f"job {job!r}: {e}") from None
        if reason:
            self.stderr.write(f"job {job!r}: {reason}")
        if as_json:
            self.stdout.write(json.dumps([f.isoformat() for f in fires]))
            return
        zone = get_zone(found.timezone)
        for fire in fires:
            self.stdout.write(f"{fire.isoformat()}  {fire.astimezone(zone).isoformat()}")


def upcoming(job, after, count):
    """(fire instants, why there are none) for a job; @every counts from `after`."""
    calendar = job.calendar.rules() if job.calendar_id else None
    args = (job.schedule, job.timezone, calendar, after)
    horizon = settings.CRONIQ_HORIZON_YEARS
    fires = next_fires(*args, count, job.calendar_policy, horizon_years=horizon)
    if fires:
        return fires, None
    reason = never_fires_reason(*args, horizon_years=horizon, policy=job.calendar_policy)
    return fires, reason or "no fire time within the horizon"


def parse_after(text):
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(text) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


parse_after.__name__ = "ISO 8601 instant"  # argparse names the type in its error


def positive_int(text):
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "count (a whole number >= 1)"
