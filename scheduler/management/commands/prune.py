import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from core.commands import WITHOUT_THE_WEB
from scheduler.housekeeping import retention
from scheduler.housekeeping.retention import Pruned


class Command(BaseCommand):
    help = (
        "Delete finished executions older than CRONIQ_EXECUTION_RETENTION_DAYS and "
        "logs older than CRONIQ_LOG_RETENTION_DAYS (in short batches, audited)."
    )
    requires_system_checks = WITHOUT_THE_WEB

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would go, delete nothing."
        )

    def handle(self, *args: Any, dry_run: bool, **options: Any) -> None:
        now = timezone.now()
        cutoffs = (
            f"executions finished before {retention.execution_cutoff(now):%Y-%m-%d %H:%M} UTC, "
            f"logs of executions finished before {retention.log_cutoff(now):%Y-%m-%d %H:%M} UTC"
        )
        if dry_run:
            pruned = retention.would_prune(now)
            self.stdout.write(f"would prune {describe(pruned)} ({cutoffs}); nothing deleted")
            return
        # It beats as it goes: the loop leaves the backlog to it meanwhile.
        pruned = retention.prune(now, announce=timezone.now)
        retention.record_pass(pruned, now, actor=("user", f"prune:{getpass.getuser()}"))
        self.stdout.write(f"pruned {describe(pruned)} ({cutoffs})")


def describe(pruned: Pruned) -> str:
    return f"{pruned.executions} execution(s) and {pruned.logs} log chunk(s)"
