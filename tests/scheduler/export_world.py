"""A configuration for the export tests (tests/scheduler/test_export*.py):
every field of every apply section at a value other than its default,
somewhere in its section; and how to read a database's configuration back
to compare two of them."""

import datetime as dt

from django.db import models

from calendars.models import Calendar, CalendarPeriod
from checks.models import Check
from notifications.models import Channel, Rule
from scheduler.models import ConcurrencyGroup, Job

NOW = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)  # a Monday
SOURCE = "croniq"  # the apply source the configuration is written under

# What the channels' secret references hold, in the environment or a file
# under CRONIQ_SECRETS_DIR: never in an export.
SECRET_ENV = {
    "CRONIQ_SECRET_HOOK": "hook-signing-value-8e1f",
    "CRONIQ_SECRET_TOKEN": "bearer-token-value-5c2a",
}
CHAT_URL_FILE = "chat-url"
CHAT_URL = "https://chat.example.com/hooks/T000/B000/secret-path-77d1"


def rich(secrets_dir):
    """The configuration, as an apply document; the chat URL is read from
    a `file:` reference under `secrets_dir`."""
    return {
        "projects": [{"name": "analytics", "description": "The data team's jobs"}],
        "calendars": [
            {
                "name": "base-days",
                "description": "Working days in Bavaria\nwith the evening off",
                "timezone": "Europe/Berlin",
                "weekdays": ["mon", "tue", "wed", "thu", "fri"],
                "holidays": {"country": "DE", "subdivision": "BY", "categories": ["public"]},
                "daily_window": {"start": "06:00", "end": "22:30"},
                "exclude": [
                    {"start": "2026-12-24", "end": "2026-12-26", "label": "Christmas"},
                    {"start": "2026-04-01T08:00:00+02:00", "end": "2026-04-01T09:00:00+02:00"},
                ],
                "include": [
                    {
                        "start": "2026-01-01T00:00:00+00:00",
                        "end": "2036-01-01T00:00:00+00:00",
                        "label": "the decade",
                    }
                ],
            },
            # In another project: the export puts it back there.
            {
                "name": "narrow",
                "project": "analytics",
                "base": "base-days",
                "weekdays": ["tue", "thu"],
            },
        ],
        "concurrency_groups": [
            {"name": "warehouse", "max_concurrent": 3, "description": "Three licences"}
        ],
        "jobs": [
            {
                "name": "nightly",
                "description": "The report: long, and watched",
                "schedule": "30 7 * * 1-5",
                "timezone": "Europe/Berlin",
                "command": "python report.py \\\n  --verbose\n",
                "env": {"REPORT_DIR": "/srv/reports", "API_TOKEN": "t0k3n-as-stored"},
                "stdin": "day=monday\n100% done\n",
                "run_as": "reports",
                "calendar": "narrow",
                "calendar_policy": "defer",
                "labels": ["linux", "gpu"],
                "tags": ["reports", "team-data"],
                "overlap": "queue",
                "max_concurrent": 2,
                "max_queue": 5,
                "concurrency_group": "warehouse",
                "jitter": "5m",
                "timeout": 3600,
                "retries": 3,
                "retry_backoff": 60,
                "misfire_policy": "run_all",
                "enabled": False,
                "owner": "team-data",
                "max_duration": "2h",
                "min_duration": 10,
                "parameters": ["DAY"],
                "on_success": ["cleanup"],
                "on_failure": ["page"],
                "requires": [{"job": "warm-cache", "succeeded_within": "12h"}],
                "requires_policy": "fail",
                "requires_timeout": "30m",
                "maintenance": "defer",
                "pause_after_failures": 4,
                # Limits (docs/design.md §15), written as people write them.
                "max_output": "256KiB",
                "on_max_output": "fail",
                "max_memory": "512MiB",
                "max_cpu_seconds": "10m",
                "success_exit_codes": [3, 0],
            },
            # Several schedules, one-shot instants, bounds and a run limit
            # (docs/design.md §14), and no `schedule` of its own.
            {
                "name": "quarter-close",
                "schedules": [
                    "0 9 1 * *",
                    {"cron": "0 9 15 * *", "timezone": "America/New_York"},
                ],
                "at": ["2031-03-31T18:00:00+02:00"],
                "not_before": "2026-03-01T00:00:00+00:00",
                "not_after": "2031-12-31T23:00:00+00:00",
                "max_runs": 12,
                "command": "close-books",
            },
            {"name": "page", "schedule": "@daily", "command": "page-oncall", "singleton": True},
            # No schedule: it runs when its webhook URL is called, the calls signed.
            {
                "name": "deploy",
                "command": "deploy.sh",
                "parameters": ["VERSION"],
                "webhook": True,
                "webhook_secret": "${CRONIQ_SECRET_HOOK}",
            },
            # No schedule: it runs when a runner starts (cron's @reboot).
            {"name": "warm-cache", "command": "warm-cache", "run_on_register": True},
            # An http job (docs/design.md §15): the runner makes the request itself.
            {
                "name": "ping-partner",
                "schedule": "*/15 * * * *",
                "kind": "http",
                "http": {
                    "method": "POST",
                    "url": "https://partner.example.com/hooks/croniq?team=data",
                    "headers": {"X-Team": "data", "Content-Type": "application/json"},
                    "body": '{"ready": true}\n',
                    "expect_status": [202, 200],
                    "timeout": "30s",
                },
                "timeout": 60,
            },
            # A container job (docs/design.md §15): the runner machine's engine runs it.
            {
                "name": "render-reports",
                "schedule": "0 4 * * *",
                "kind": "container",
                "container": {
                    "image": "registry.example.com/data/reports:1.4",
                    "args": ["python", "render.py", "--days", "7"],
                    "env": {"REPORT_BUCKET": "s3://reports", "LANG": "C.UTF-8"},
                    "pull": "always",
                    "network": "bridge",
                },
                "timeout": 900,
            },
            {
                "name": "cleanup",
                "schedule": "@every 1h",
                "command": "rm -rf /tmp/reports/*",
                "run_on": "all",
                "stagger": 30,
            },
        ],
        "channels": [
            {
                "name": "mail-ops",
                "kind": "email",
                "to": ["ops@example.com", "dev@example.com"],
                "enabled": False,
            },
            {
                "name": "hook",
                "kind": "webhook",
                "url": "https://hooks.example.com/croniq",
                "secret": "${CRONIQ_SECRET_HOOK}",
                "headers": {"X-Team": "data", "Authorization": "Bearer ${CRONIQ_SECRET_TOKEN}"},
                "timeout": 12.5,
            },
            {
                "name": "chat",
                "kind": "slack",
                "url": f"file:{secrets_dir / CHAT_URL_FILE}",
                "format": "discord",
                "username": "Croniq bot",
            },
        ],
        "notify": [
            {
                "name": "failures",
                "events": ["execution.given_up", "job.failing"],
                "channels": ["mail-ops", "hook"],
                "jobs": "night*",
                "checks": "db1-*",
                "labels": ["linux"],
                "calendar": "base-days",
                "owner": "team-data",
                "fallback": True,
                "failures_in_a_row": 3,
                "slow_factor": 2.5,
                "grace": "10m",
                "throttle": "30m",
                "digest": True,
                "enabled": False,
            },
            {"name": "chatter", "events": ["job.recovered"], "channels": ["chat"]},
        ],
        "checks": [
            {
                "name": "db1-backup",
                "description": "pg_dump on db1,\nwatched",
                "schedule": "30 2 * * 1-5",
                "timezone": "Europe/Berlin",
                "grace": "45m",
                "labels": ["host:db1", "backups"],
            },
            {"name": "heartbeat", "period": "5m"},
        ],
    }


def with_secrets(monkeypatch, settings, secrets_dir):
    """The environment and the secrets directory the references resolve in
    (apply checks that they do)."""
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    settings.CRONIQ_SECRETS_DIR = str(secrets_dir)
    (secrets_dir / CHAT_URL_FILE).write_text(CHAT_URL + "\n")


# -- a database's configuration, to compare two --------------------------------------

MODELS = (Calendar, CalendarPeriod, ConcurrencyGroup, Job, Channel, Rule, Check)
# Row fields that are not configuration: keys, timestamps, the scheduler's
# own, and an operator's pause.
NOT_CONFIGURATION = {
    "id",
    "created_at",
    "updated_at",
    *Job.SCHEDULER_FIELDS,
    "paused_at",
    "paused_until",
    "pause_reason",
    # A job's webhook key, drawn anew as its webhook is turned on, never in a document.
    "webhook_key",
    # A check's: its token (drawn anew by a new check, never in a document),
    # and what its pings and the loop write.
    "token",
    "state",
    "last_ping_at",
    "last_start_at",
    "next_expected_at",
    "down_at",
    "n_pings",
    "pruned_through",
    "rate_window",
    "rate_count",
}


def configuration(ownership=True):
    """{model: [row fields]} of every configuration row, relations by
    name; with `ownership` False, without who manages each row."""
    left_out = NOT_CONFIGURATION | (set() if ownership else {"managed_by", "managed_source"})
    return {
        model.__name__: sorted((fields_of(row, left_out) for row in model.objects.all()), key=repr)
        for model in MODELS
    }


def fields_of(row, left_out):
    values = {}
    for field in row._meta.concrete_fields:
        if field.name in left_out:
            continue
        value = getattr(row, field.name)
        if isinstance(field, models.ForeignKey) and value is not None:
            value = value.name
        values[field.name] = value
    for field in row._meta.many_to_many:
        values[field.name] = sorted(r.name for r in getattr(row, field.name).all())
    return values


def wipe():
    """Delete every configuration row: an empty database to apply to."""
    Check.objects.all().delete()
    Rule.objects.all().delete()
    Channel.objects.all().delete()
    Job.objects.all().delete()
    ConcurrencyGroup.objects.all().delete()
    while Calendar.objects.exists():  # a base goes after the calendars on it
        Calendar.objects.filter(children__isnull=True).delete()
