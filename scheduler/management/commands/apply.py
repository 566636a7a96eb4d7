import getpass
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from core.commands import WITHOUT_THE_WEB
from scheduler.apply.document import ApplyError, apply, load, plan, source_name
from scheduler.apply.report import Change
from scheduler.jobs.label_checks import document_label_warnings


class Command(BaseCommand):
    help = (
        "Apply jobs and calendars (and the sections apps add: notification channels "
        "and rules, checks) from a YAML or JSON file (all or nothing, audited)."
    )
    requires_system_checks = WITHOUT_THE_WEB

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--dry-run", action="store_true", help="Print the plan, change nothing."
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Delete the jobs, calendars, channels, rules and checks this file (its "
            "source) made that it no longer lists.",
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print the changes as JSON."
        )
        parser.add_argument(
            "--source",
            help="The name the file's jobs and calendars are managed under (default: "
            "the file's name without its extension); --prune deletes only that name's.",
        )

    def handle(
        self,
        *args: Any,
        file: str,
        dry_run: bool,
        prune: bool,
        as_json: bool,
        source: str,
        **options: Any,
    ) -> None:
        try:
            managed_source = source_name(Path(file).stem if source is None else source)
            document = load(file)
            changes = apply(
                document,
                now=timezone.now(),
                prune=prune,
                dry_run=dry_run,
                actor=("user", f"apply:{getpass.getuser()}"),
                source=file,
                managed_source=managed_source,
            )
        except ApplyError as e:
            for error in e.errors:
                self.stderr.write(f"error: {error}")
            raise CommandError(f"{file}: nothing applied ({len(e.errors)} error(s))") from None
        self.report(changes, dry_run, as_json)
        self.warn_about_labels(document)

    def report(self, changes: list[Change], dry_run: bool, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(plan(changes), default=str))
            return
        real = [c for c in changes if c.action != "unchanged"]
        for change in real:
            self.stdout.write(str(change))
            for line in change.details():
                self.stdout.write(line)
        prefix = "would apply" if dry_run else "applied"
        if not real:
            self.stdout.write("nothing to change: everything is as the file says")
        else:
            self.stdout.write(f"{prefix} {len(real)} change(s)")

    def warn_about_labels(self, document: dict[str, Any]) -> None:
        """Jobs whose labels no runner carries: a warning on stderr (stdout
        stays the plan, --json stays parseable); the file is applied anyway."""
        for warning in document_label_warnings(document):
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
