"""How long a large apply holds the database's write lock (its write
transaction): the time every tick, heartbeat and finish waits behind it.

    .venv/bin/python bench/apply_lock.py                  # SQLite (temporary file)
    DATABASE_URL=postgres://postgres@127.0.0.1/postgres .venv/bin/python bench/apply_lock.py
      (a fresh database croniq_bench_<random> is created and dropped on PostgreSQL)
    .venv/bin/python bench/apply_lock.py --jobs 500       # a quicker run

Applies a document of JOBS jobs and CALENDARS calendars (each with a few
blackout periods, the jobs spread over them) three times: created, then the
same file again (nothing changes), then with every job's command changed.
Each pass prints a JSON line: its total time, and the write lock's longest
hold, timed from the first statement that writes (INSERT, UPDATE, DELETE)
to the end of the apply (its COMMIT).
"""

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tick import setup_database  # noqa: E402  (bench/ is not a package)

WRITES = ("INSERT", "UPDATE", "DELETE")


def emit(**fields):
    print(json.dumps(fields), flush=True)


def document(jobs, calendars, command="true"):
    return {
        "calendars": [
            {
                "name": f"cal-{c}",
                "timezone": "Europe/Berlin",
                "weekdays": ["mon", "tue", "wed", "thu", "fri"],
                "exclude": [
                    {"start": f"2027-0{m}-10", "end": f"2027-0{m}-12", "label": "freeze"}
                    for m in range(1, 6)
                ],
            }
            for c in range(calendars)
        ],
        "jobs": [
            {
                "name": f"job-{j}",
                "schedule": f"{j % 60} */2 * * *",
                "command": f"{command} {j}",
                "labels": ["linux"],
                "env": {"TEAM": "ops", "INDEX": str(j)},
                "calendar": f"cal-{j % calendars}" if calendars else None,
                "retries": 2,
                "timeout": 600,
            }
            for j in range(jobs)
        ],
    }


class WriteClock:
    """Notes the instant of the first writing statement on the connection."""

    def __init__(self):
        self.first_write = None

    def __call__(self, execute, sql, params, many, context):
        if self.first_write is None and sql.lstrip().upper().startswith(WRITES):
            self.first_write = time.perf_counter()
        return execute(sql, params, many, context)


@contextmanager
def timed_writes():
    from django.db import connection

    clock = WriteClock()
    with connection.execute_wrapper(clock):
        yield clock


def timed_apply(doc, now):
    from scheduler.apply.document import apply

    with timed_writes() as clock:
        start = time.perf_counter()
        changes = apply(doc, now=now, managed_source="bench")
        end = time.perf_counter()
    held = end - clock.first_write if clock.first_write is not None else 0.0
    changed = sum(1 for c in changes if c.action != "unchanged")
    return {"total_s": round(end - start, 3), "lock_held_s": round(held, 3), "changes": changed}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--calendars", type=int, default=50)
    args = parser.parse_args(argv)
    backend, cleanup = setup_database()
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        size = len(json.dumps(document(args.jobs, args.calendars)))
        for name, doc in (
            ("create", document(args.jobs, args.calendars)),
            ("unchanged", document(args.jobs, args.calendars)),
            ("update", document(args.jobs, args.calendars, command="echo")),
        ):
            emit(
                bench="apply_lock",
                backend=backend,
                run=name,
                jobs=args.jobs,
                calendars=args.calendars,
                document_bytes=size,
                **timed_apply(doc, now),
            )
    finally:
        cleanup()


if __name__ == "__main__":
    main()
