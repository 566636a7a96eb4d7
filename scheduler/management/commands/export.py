from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.commands import WITHOUT_THE_WEB
from projects import names as project_names
from scheduler.apply.export import ExportError, export


class Command(BaseCommand):
    help = (
        "Print the whole configuration (calendars, concurrency groups, jobs, notification "
        "channels and rules) as one apply document; no runs, runners, pauses or audit."
    )
    requires_system_checks = WITHOUT_THE_WEB

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--project",
            help="only this project's rows, under `project:` at the top of the document",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = options.get("project")
        if project is not None and not project_names.exists(project):
            raise CommandError(f"--project: no project named {project!r}")
        try:
            exported = export(project=project)
        except ExportError as e:
            raise CommandError(str(e)) from None
        # stdout is the document alone (`export > croniq.yaml`); the rest on stderr.
        self.stdout.write(exported.text(), ending="")
        for warning in exported.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
