"""`manage.py next_runs JOB [--after ISO8601] [--count N] [--json]` (docs/design.md §5)."""

import json
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from calendars.rules import RulesError
from core.commands import WITHOUT_THE_WEB
from scheduler.jobs.cron import ScheduleError
from scheduler.jobs.previews import skipped_months
from scheduler.models import Job


class Command(BaseCommand):
    help = (
        "Print the next fire instants of a job strictly after --after (default: now), "
        "with its calendar and calendar policy applied, counted as the scheduler counts "
        "(an @every job keeps the grid of its next run). An @business_day job's months "
        "without an occurrence among them are named on stderr."
    )
    requires_system_checks = WITHOUT_THE_WEB

    def add_arguments(self, parser: CommandParser) -> None:
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

    def handle(
        self,
        *args: Any,
        job: str,
        after: datetime | None,
        count: int,
        as_json: bool,
        **options: Any,
    ) -> None:
        found = Job.objects.select_related("calendar").filter(name=job).first()
        if found is None:
            raise CommandError(f"unknown job {job!r}", returncode=1)
        after = after or timezone.now()
        try:
            fires = found.upcoming(after, count)
            if not fires:
                self.stderr.write(f"job {job!r}: {found.no_fires_reason(after)}")
            else:
                for _, note in skipped_months(found, after, fires[-1]):
                    self.stderr.write(f"job {job!r}: {note}")
        except (ScheduleError, RulesError) as e:
            raise CommandError(f"job {job!r}: {e}") from None
        if as_json:
            self.stdout.write(json.dumps([f.isoformat() for f in fires]))
            return
        for fire in fires:
            self.stdout.write(f"{fire.isoformat()}  {found.wall_time(fire).isoformat()}")


def parse_after(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(text) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


parse_after.__name__ = "ISO 8601 instant"  # argparse names the type in its error


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


positive_int.__name__ = "count (a whole number >= 1)"
