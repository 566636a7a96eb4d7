import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from croniq_runner.crontab import Crontab, import_crontabs, machine_timezone, render, text_of

STDIN = "-"


class Command(BaseCommand):
    help = (
        "Print crontab files as an apply document (stdout) and a report of every line "
        "(stderr): the job it became, or why it was skipped (docs/design.md §13)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="crontab files; - reads stdin")
        parser.add_argument(
            "--host",
            metavar="NAME",
            help="label the jobs host:NAME (start that machine's runner with "
            "--labels host:NAME) and start their names with it",
        )
        parser.add_argument(
            "--system",
            action="store_true",
            help="system crontabs (/etc/crontab, /etc/cron.d/*): a user field before the command",
        )
        parser.add_argument(
            "--timezone",
            metavar="TZ",
            help="the zone of jobs no CRON_TZ= or TZ= line covers (default: this machine's)",
        )
        parser.add_argument(
            "--source",
            metavar="NAME",
            help="the name the report and the jobs' descriptions give the file (one FILE "
            "only; default: its path). `--source 'crontab -l'` reproduces what "
            "`croniq-runner discover` prints for a saved `crontab -l`.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[str] = options["files"]
        if options["source"] is not None and len(files) > 1:
            raise CommandError("--source names one file: give one FILE with it")
        crontabs = [self._read(path, options["source"] or path) for path in files]
        try:
            imported = import_crontabs(
                crontabs,
                timezone=options["timezone"] or machine_timezone(),
                system=options["system"],
                host=options["host"],
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        # stdout is the document alone (`import_crontab ... > jobs.yaml`).
        self.stdout.write(render(imported), ending="")
        self.stderr.write(imported.report_text(), ending="")

    def _read(self, path: str, source: str) -> Crontab:
        try:
            if path == STDIN:
                raw = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as handle:
                    raw = handle.read()
        except OSError as error:
            raise CommandError(f"{path}: {error.strerror}") from None
        return Crontab(source, text_of(raw))
