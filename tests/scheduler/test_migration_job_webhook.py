"""scheduler 0022 on a database holding jobs: none gets a webhook (its key
NULL, which the unique index takes for every row), and each may get one."""

import datetime as dt
import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.models import Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

WEBHOOK = importlib.import_module("scheduler.migrations.0022_job_webhook").Migration
BEFORE = WEBHOOK.dependencies
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_upgrade_without_a_webhook_and_may_get_one():
    old = migrate(BEFORE).get_model("scheduler", "Job")
    for name in ("report", "cleanup"):
        old.objects.create(name=name, schedule="*/5 * * * *", command="true", next_run_at=T0)
    try:
        migrate([("scheduler", "0022_job_webhook")])
        migrate(everything())
        jobs = list(Job.objects.order_by("name"))
        stored = [(job.webhook, job.webhook_key, job.webhook_secret) for job in jobs]
        assert stored == [(False, None, "")] * 2
        for job in jobs:
            job.full_clean()  # a stored job is still valid as it is
        report = jobs[1]
        report.webhook = True
        report.save(update_fields=["webhook"])
        report.refresh_from_db()
        # Saving the switch alone saves its key (Job.save).
        assert report.webhook_key and report.webhook_key in report.webhook_url
    finally:
        migrate(everything())
