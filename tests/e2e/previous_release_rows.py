"""Rows in every table of every Croniq app, made by the previous release.

Run inside the previous release's tree (harness.previous_release:
previous_python), on a database its own `migrate` made; never imported by
the suite. It writes what a working installation holds (jobs of every kind,
runs in every state with their logs, a runner and its token, channels,
rules, notifications, dead letters, audit events...), then checks by
introspection of that release's models that no table of its apps is empty:
when the pinned release moves on to one with a table this script does not
fill, the upgrade test fails until it does.

Prints one line, `RESULT:` and JSON: the credentials it issued, the job due
now, and the tables with their primary keys, for the test to compare after
the current code's migrate.
"""

import json
import sys
from datetime import time, timedelta
from pathlib import Path

import django

django.setup()

from django.apps import apps  # noqa: E402 (after setup)
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

import audit  # noqa: E402
import scheduler  # noqa: E402
from calendars.models import Calendar, CalendarPeriod  # noqa: E402
from control.models import ApiKey  # noqa: E402
from notifications.models import (  # noqa: E402
    Channel,
    Delivery,
    Event,
    Mute,
    Notification,
    Rule,
)
from runners.models import Runner, RunnerToken  # noqa: E402
from scheduler.models import (  # noqa: E402
    ConcurrencyGroup,
    DeadLetter,
    Execution,
    Job,
    JobHealth,
    LogChunk,
    MaintenanceSwitch,
    MaintenanceWindow,
    TriggerKey,
)

TREE = Path.cwd()
# The label of the job due at the upgrade, which the test's agent runs; no
# other job carries it.
DUE_LABEL = "after-upgrade"
# A stamp older applies wrote into a channel's managed_by: a path too long
# to become a source (notifications 0004 leaves it apply's, of no file).
LONG_STAMP = "/srv/croniq/" + "deep/" * 20 + "croniq.yaml"


def croniq_apps():
    """The apps whose code is in the release's tree: Croniq's own."""
    return [app for app in apps.get_app_configs() if Path(app.path).is_relative_to(TREE)]


def tables():
    """{table: primary key column} of every table of Croniq's apps,
    many-to-many tables included."""
    found = {}
    for app in croniq_apps():
        for model in app.get_models(include_auto_created=True):
            if model._meta.managed and not model._meta.proxy:
                found[model._meta.db_table] = model._meta.pk.column
    return found


def empty_tables():
    return sorted(
        model._meta.db_table
        for app in croniq_apps()
        for model in app.get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy and not model.objects.exists()
    )


def job(name, now, **fields):
    row = Job(name=name, **{"schedule": "0 3 * * *", "command": f"echo {name}", **fields})
    row.next_run_at = row.next_fire_after(now)
    row.save()
    return row


def run(of, now, state, attempt=1, runner=None, **fields):
    """An execution of `of` for the instant an hour ago, in `state`."""
    instant = now - timedelta(hours=1)
    held = runner is not None
    return Execution.objects.create(
        job=of,
        scheduled_for=instant,
        attempt=attempt,
        state=state,
        singleton=of.singleton,
        run_after=instant,
        created_at=instant,
        runner=runner,
        session=runner.session if held else "",
        lease=attempt if held else 0,
        claimed_at=instant + timedelta(seconds=1) if held else None,
        **fields,
    )


def fill(now):
    """Every table's rows; returns what the test needs to use them."""
    token, runner_secret = RunnerToken.issue("upgraded-runners")
    retired, _ = RunnerToken.issue("retired-runners")
    RunnerToken.objects.filter(pk=retired.pk).update(revoked_at=now - timedelta(days=1))
    key, key_secret = ApiKey.issue("upgrade-ops", ["admin"], created_by="command")
    ApiKey.issue("upgrade-reader", ["jobs:read"], expires_at=now + timedelta(days=90))

    office = Calendar.objects.create(
        name="office-hours",
        timezone="Europe/Berlin",
        weekdays=["mon", "tue", "wed", "thu", "fri"],
        holiday_country="DE",
        window_start=time(8),
        window_end=time(18),
        managed_by="apply",
        managed_source="croniq",
    )
    quarter_end = Calendar.objects.create(name="no-quarter-end", base=office)
    CalendarPeriod.objects.create(
        calendar=quarter_end,
        label="year-end freeze",
        start_date=(now + timedelta(days=30)).date(),
        end_date=(now + timedelta(days=40)).date(),
    )
    CalendarPeriod.objects.create(
        calendar=quarter_end,
        kind=CalendarPeriod.EXCLUDE,
        label="migration window",
        start_at=now + timedelta(days=2),
        end_at=now + timedelta(days=2, hours=4),
    )
    reports = ConcurrencyGroup.objects.create(name="reports", max_concurrent=2)

    nightly = job(
        "nightly-report",
        now,
        calendar=office,
        labels=["linux"],
        env={"REPORT": "daily"},
        concurrency_group=reports,
        retries=2,
        owner="finance",
        on_failure=["page-finance"],
        managed_by="apply",
        managed_source="croniq",
    )
    job("page-finance", now, schedule="@every 1h", labels=["linux"], parameters=["REASON"])
    queued = job("queued-import", now, overlap=Job.QUEUE, max_concurrent=1, labels=["linux"])
    single = job("single-backup", now, singleton=True, labels=["linux"], calendar=quarter_end)
    job("paused-cleanup", now, paused_at=now, pause_reason="disk full", labels=["linux"])
    everywhere = job("everywhere", now, run_on=Job.ALL, labels=["linux"], jitter=30)
    due = Job(
        name="due-at-upgrade",
        schedule="* * * * *",
        command='echo "ran after the upgrade on $CRONIQ_JOB"',
        labels=[DUE_LABEL],
    )
    # Due now: the first loop of the new release fires it (on time or as
    # its one catch-up run, however long the upgrade took).
    due.next_run_at = now.replace(second=0, microsecond=0)
    due.last_scheduled_at = due.next_run_at - timedelta(minutes=1)
    due.save()

    runner = Runner.objects.create(
        name="old-runner",
        token=token,
        labels=["linux"],
        version="0.2.0",
        hostname="build-01",
        capacity=4,
        session="a" * 32,
        registered_at=now - timedelta(days=3),
        last_seen_at=now - timedelta(seconds=5),
    )
    ok = run(nightly, now, Execution.SUCCEEDED, runner=runner, exit_code=0, log_size=24)
    ok.finished_at = now - timedelta(minutes=59)
    ok.save()
    LogChunk.objects.create(execution=ok, seq=1, data="report written\n")
    LogChunk.objects.create(execution=ok, seq=2, data="rows: 1204\n")
    failed = run(
        single, now, Execution.FAILED, runner=runner, exit_code=3, finished_at=now, error=""
    )
    LogChunk.objects.create(execution=failed, seq=1, data="backup target unreachable\n")
    letter = DeadLetter.objects.create(
        execution=failed,
        reason=DeadLetter.FAILED,
        detail="exit code 3",
        log_tail="backup target unreachable",
        landed_at=now,
    )
    replay = run(single, now, Execution.SUCCEEDED, attempt=2, trigger=Execution.REPLAY)
    DeadLetter.objects.filter(pk=letter.pk).update(replayed_at=now, replayed_execution=replay)
    # The discarded dead letter of an older failure: its own execution.
    lost = run(everywhere, now, Execution.LOST, pinned_to="old-runner", lost_reason="lease")
    DeadLetter.objects.create(
        execution=lost, reason=DeadLetter.LOST, landed_at=now, discarded_at=now
    )
    running = run(
        queued,
        now,
        Execution.RUNNING,
        runner=runner,
        lease_expires_at=now + timedelta(seconds=30),
    )
    Execution.objects.create(
        job=queued,
        scheduled_for=now - timedelta(minutes=30),
        state=Execution.QUEUED,
        run_after=now - timedelta(minutes=30),
        created_at=now - timedelta(minutes=30),
    )
    manual = Execution.objects.create(
        job=nightly,
        scheduled_for=now,
        trigger=Execution.MANUAL,
        run_after=now + timedelta(days=365),  # not for the test's agent
        created_at=now,
        env={"REPORT": "weekly"},
    )
    TriggerKey.objects.create(job=nightly, key="deploy-4711", execution=manual, created_at=now)
    Execution.objects.create(
        job=nightly,
        scheduled_for=now - timedelta(hours=2),
        state=Execution.CANCELLED,
        trigger=Execution.CHAIN,
        upstream=ok,
        run_after=now - timedelta(hours=2),
        created_at=now - timedelta(hours=2),
        cancel_requested_at=now - timedelta(hours=2),
        finished_at=now - timedelta(hours=2),
    )
    JobHealth.objects.create(
        job=single,
        failure_streak=1,
        failing_since=now,
        last_failure_at=now,
        last_success_at=now - timedelta(days=1),
        last_state=Execution.FAILED,
        succeeded=40,
        failed=1,
    )
    JobHealth.objects.create(job=nightly, last_success_at=now, succeeded=7, last_state="succeeded")

    MaintenanceSwitch.objects.create(pk=MaintenanceSwitch.PK, on=False, changed_at=now)
    MaintenanceWindow.objects.create(
        start=now - timedelta(days=2), end=now - timedelta(days=1), labels=["db"], reason="patch"
    )

    # Channels and rules as apply stamped them (its source's name, or from
    # older applies a path) and as the admin made them (no stamp).
    hook = Channel.objects.create(
        name="ops-hook",
        kind=Channel.WEBHOOK,
        url="https://hooks.example.com/croniq",
        secret="${CRONIQ_SECRET_HOOK}",
        managed_by="croniq",
    )
    chat = Channel.objects.create(
        name="team-chat", kind=Channel.SLACK, url="https://chat.example.com/hooks/x"
    )
    mail = Channel.objects.create(
        name="finance-mail", kind=Channel.EMAIL, to=["finance@example.com"], managed_by=LONG_STAMP
    )
    failing = Rule.objects.create(
        name="finance-failing",
        events=["job.failing"],
        jobs="nightly-*",
        owner="finance",
        calendar=office,
        managed_by="croniq",
    )
    failing.channels.set([hook, mail])
    fallback = Rule.objects.create(name="everything-else", events=["*"], fallback=True)
    fallback.channels.set([chat])
    Mute.objects.create(
        rule=fallback, until=now + timedelta(hours=2), note="chat migration", created_at=now
    )
    event = Event.objects.create(
        name="job.failing",
        at=now,
        job=single,
        execution=failed,
        runner=runner,
        data={"streak": 1},
        key=f"failing:{failed.pk}",
        routed_at=now,
    )
    sent = Notification.objects.create(
        event=event,
        name=event.name,
        rule=failing,
        channel=hook,
        job=single,
        pool="linux",
        runner_name=runner.name,
        message={"event": event.name, "summary": "single-backup is failing"},
        state=Notification.DELIVERED,
        created_at=now,
        attempts=2,
        delivered_at=now,
        last_status=200,
    )
    Delivery.objects.create(
        notification=sent, attempt=1, at=now, ok=False, status_code=502, latency=0.2
    )
    Delivery.objects.create(
        notification=sent, attempt=2, at=now, ok=True, status_code=200, latency=0.1
    )

    audit.record("runner.takeover", target=runner, at=now, data={"session": runner.session})
    audit.record(
        "execution.reaped",
        target=lost,
        at=now,
        counter=("croniq_executions_reaped_total", {"reason": "lease"}),
    )
    audit.increment("croniq_executions_total", state="succeeded")
    audit.mark_tick(now)
    return {
        "runner_token": runner_secret,
        "api_key": key_secret,
        "api_key_name": key.name,
        "due_job": due.name,
        "due_label": DUE_LABEL,
        "running_execution": running.pk,
        "long_stamp": LONG_STAMP,
    }


def main():
    # The release's own code, not the current checkout's (installed in the
    # same virtualenv): a test of nothing otherwise.
    own = Path(scheduler.__file__).resolve()
    if not own.is_relative_to(TREE.resolve()):
        sys.exit(f"scheduler imported from {own}, not from the release's tree {TREE}")
    with transaction.atomic():
        made = fill(timezone.now())
    empty = empty_tables()
    if empty:
        sys.exit(f"tables of the previous release left empty (fill them here): {empty}")
    print("RESULT:" + json.dumps({**made, "tables": tables()}))


if __name__ == "__main__":
    main()
