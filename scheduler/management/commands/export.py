from typing import Any

from django.core.management.base import BaseCommand, CommandError

from scheduler.apply.export import ExportError, export


class Command(BaseCommand):
    help = (
        "Print the whole configuration (calendars, concurrency groups, jobs, notification "
        "channels and rules) as one apply document; no runs, runners, pauses or audit."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            exported = export()
        except ExportError as e:
            raise CommandError(str(e)) from None
        # stdout is the document alone (`export > croniq.yaml`); the rest on stderr.
        self.stdout.write(exported.text(), ending="")
        for warning in exported.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
