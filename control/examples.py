"""Request examples for /api/docs: what a caller sends, as Swagger UI fills
it in. tests/control/test_openapi_examples.py sends each to the real API."""

from typing import Any

JOB = {
    "name": "morning-report",
    "schedule": "30 7 * * 1-5",
    "timezone": "Europe/Berlin",
    "command": "python report.py",
    "labels": ["linux"],
    "tags": ["reports"],
    "calendar": None,
    "retries": 2,
    "parameters": ["REPORT_DATE"],
}

JOB_PATCH = {"schedule": "0 8 * * 1-5", "retries": 3}

CHECK = {
    "name": "db1-backup",
    "schedule": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "grace": "30m",
    "description": "pg_dump on db1, from its crontab",
    "labels": ["host:db1"],
}

CHECK_PATCH = {"grace": "1h", "paused": False}

CALENDAR = {
    "timezone": "Europe/Berlin",
    "weekdays": ["mon", "tue", "wed", "thu", "fri"],
    "holidays": {"country": "DE", "subdivision": "BY"},
    "daily_window": {"start": "06:00", "end": "22:00"},
    "exclude": [{"label": "year-end freeze", "start": "2026-12-24", "end": "2026-12-31"}],
}

APPLY_DOCUMENT = {
    "calendars": [{"name": "de-by-workdays", **CALENDAR}],
    "jobs": [{**JOB, "calendar": "de-by-workdays"}],
}

APPLY_YAML = """\
calendars:
  - name: de-by-workdays
    timezone: Europe/Berlin
    weekdays: [mon, tue, wed, thu, fri]
    holidays: {country: DE, subdivision: BY}
jobs:
  - name: morning-report
    schedule: "30 7 * * 1-5"
    timezone: Europe/Berlin
    command: python report.py
    calendar: de-by-workdays
"""

TRIGGER = {
    "idempotency_key": "deploy-4711",
    "env": {"REPORT_DATE": "2026-11-30"},
    "scheduled_for": "2026-11-30T07:30:00+01:00",
}

BACKFILL = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-08T00:00:00Z", "dry_run": True}

# `until` must be in the future when the example is sent (the suite sends
# it): years ahead, so the example never turns into a refused call.
PAUSE = {"reason": "upstream outage", "until": "2036-01-05T06:00:00Z"}

REPLAY = {"force": False}

DISCARD = {"ids": [41, 42]}
MAINTENANCE = {
    "on": False,
    "windows": [
        {
            "start": "2026-12-05T22:00:00Z",
            "end": "2026-12-06T02:00:00Z",
            "labels": ["linux"],
            "reason": "kernel upgrade",
        }
    ],
}


def body(example: dict[str, Any], content_type: str = "application/json") -> dict[str, Any]:
    """The `openapi_extra` of a call whose body is a free mapping."""
    return {"requestBody": {"content": {content_type: {"example": example}}}}


def schema(example: dict[str, Any]) -> dict[str, Any]:
    """A Schema's `model_config` extra: its example in /api/docs."""
    return {"examples": [example]}
