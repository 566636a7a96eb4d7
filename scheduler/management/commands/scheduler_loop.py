"""The scheduler worker: fires due jobs, times out and reaps executions.

`handle()` only loops, sleeps and watches for shutdown; the work is in
scheduler.firing.loop.SchedulerLoop, whose `tick(now)` tests call directly.
"""

import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core import tracing
from core.commands import WITHOUT_THE_WEB
from scheduler.firing.loop import SchedulerLoop


class Command(BaseCommand):
    help = "Fire due jobs and reap orphaned executions, until SIGTERM/SIGINT."
    requires_system_checks = WITHOUT_THE_WEB

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run a single tick and exit.")
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.CRONIQ_TICK_INTERVAL,
            help="Longest sleep between ticks, in seconds (default CRONIQ_TICK_INTERVAL).",
        )

    def handle(self, *args: Any, once: bool, interval: float, **options: Any) -> None:
        loop = SchedulerLoop(interval=interval)
        try:
            if once:
                loop.run_once()
                return
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: loop.stop())
            loop.run_forever()
        finally:
            # The spans still queued leave now, within a bounded wait.
            tracing.flush()
