import sys
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.commands import WITHOUT_THE_WEB
from croniq_runner.crontab import (
    Crontab,
    Imported,
    import_crontabs,
    machine_timezone,
    render,
    text_of,
    wrap_crontab,
)

STDIN = "-"


class Command(BaseCommand):
    help = (
        "Print crontab files as an apply document (stdout) and a report of every line "
        "(stderr): the job it became, or why it was skipped (docs/design.md §13). "
        "--checks: a check per line instead; --checks --wrap: the crontab with its "
        "lines run by croniq-runner wrap, pinging those checks."
    )
    requires_system_checks = WITHOUT_THE_WEB

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
        parser.add_argument(
            "--checks",
            action="store_true",
            help="a check for each line with a schedule (a `checks:` section), named as "
            "its job would be, instead of jobs: watch the lines while cron runs them",
        )
        parser.add_argument(
            "--wrap",
            action="store_true",
            help="with --checks, one FILE: print the crontab itself, each line whose check "
            "exists run by `croniq-runner wrap --check TOKEN` (tokens from this server, "
            "never in a document), every other line as it was",
        )
        parser.add_argument(
            "--runner-path",
            metavar="PATH",
            default="croniq-runner",
            help="with --wrap: croniq-runner as that machine's cron finds it (default "
            "croniq-runner: on the crontab's PATH, cron's default being /usr/bin:/bin)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[str] = options["files"]
        if options["source"] is not None and len(files) > 1:
            raise CommandError("--source names one file: give one FILE with it")
        if options["wrap"] and not options["checks"]:
            raise CommandError("--wrap goes with --checks: import_crontab --checks --wrap FILE")
        if options["wrap"] and len(files) > 1:
            raise CommandError("--wrap prints one crontab: give one FILE with it")
        # --wrap prints the file back: bytes that are not UTF-8 could not be kept.
        crontabs = [self._read(path, options["source"] or path, options["wrap"]) for path in files]
        try:
            imported = import_crontabs(
                crontabs,
                timezone=options["timezone"] or machine_timezone(),
                system=options["system"],
                host=options["host"],
                checks=options["checks"],
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        if options["wrap"]:
            self._wrap(crontabs[0], imported, options["runner_path"])
            return
        # stdout is the document alone (`import_crontab ... > jobs.yaml`).
        self.stdout.write(render(imported), ending="")
        self.stderr.write(imported.report_text(), ending="")

    def _wrap(self, crontab: Crontab, imported: Imported, runner_path: str) -> None:
        """The wrapped crontab on stdout (`... --wrap FILE > FILE.wrapped`),
        its report on stderr."""
        tokens = ping_tokens([watched.check for watched in imported.watched])
        text, report = wrap_crontab(
            crontab, imported, tokens, settings.CRONIQ_PUBLIC_URL, program=runner_path
        )
        self.stdout.write(text, ending="")
        self.stderr.write("".join(f"{entry}\n" for entry in report), ending="")

    def _read(self, path: str, source: str, strict: bool = False) -> Crontab:
        try:
            if path == STDIN:
                raw = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as handle:
                    raw = handle.read()
        except OSError as error:
            raise CommandError(f"{path}: {error.strerror}") from None
        if strict:
            try:
                return Crontab(source, raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise CommandError(
                    f"{path}: not UTF-8 text: --wrap could not print its lines back as they are"
                ) from None
        return Crontab(source, text_of(raw))


def ping_tokens(names: list[str]) -> dict[str, str]:
    """The tokens of the checks named that exist, by name, from the app that
    keeps checks (an app config's `ping_tokens`)."""
    tokens: dict[str, str] = {}
    for config in apps.get_app_configs():
        lookup = getattr(config, "ping_tokens", None)
        if lookup is not None:
            tokens.update(lookup(names))
    return tokens
