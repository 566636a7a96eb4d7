"""The web server and the scheduler loop in one process (scheduler.firing.serve)."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core import tracing
from scheduler.firing.loop import SchedulerLoop
from scheduler.firing.serve import OneProcess, web_server


class Command(BaseCommand):
    help = (
        "Serve the web application and run the scheduler loop in one process, "
        "until SIGTERM/SIGINT. For one machine on SQLite; with PostgreSQL and "
        "several processes run uvicorn and scheduler_loop apart."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to bind.")
        parser.add_argument("--port", type=int, default=8000, help="Port to bind.")
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.CRONIQ_TICK_INTERVAL,
            help="Longest sleep between ticks, in seconds (default CRONIQ_TICK_INTERVAL).",
        )
        parser.add_argument(
            "--access-log",
            action="store_true",
            help="Log every HTTP request (off by default: runners' long-polls are most of them).",
        )

    def handle(
        self, *args: Any, host: str, port: int, interval: float, access_log: bool, **options: Any
    ) -> None:
        server = web_server(host, port, access_log=access_log)
        process = OneProcess(server, SchedulerLoop(interval=interval))
        try:
            code = process.run()
        finally:
            # The loop's last spans too (the web server flushed at its stop).
            tracing.flush()
        if code:
            raise SystemExit(code)
