"""Upgrading masks the secret job env values that older audit events hold."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("audit", "0004_counter_shards")
AFTER = ("audit", "0005_mask_secret_env_in_job_events")
AT = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
MASK = "********"


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


@pytest.fixture
def old_events():
    apps = migrate(BEFORE)
    AuditEvent = apps.get_model("audit", "AuditEvent")

    def add(action, data):
        return AuditEvent.objects.create(at=AT, action=action, data=data).pk

    events = {
        "admin": add(
            "job.changed",
            {"env": [{"DB_PASSWORD": "old-pw"}, {"DB_PASSWORD": "new-pw", "DIR": "/srv"}]},
        ),
        "apply": add(
            "job.created",
            {"name": "report", "via": "apply", "diff": {"env": [None, {"API_TOKEN": "tok"}]}},
        ),
        "deleted": add("job.deleted", {"env": [{"ssh_key": "k", "PATH": "/bin"}, None]}),
        "plain": add("job.changed", {"schedule": ["@daily", "@hourly"]}),
        "other": add("runner.takeover", {"env": [{"API_TOKEN": "kept"}]}),
    }
    yield events
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_upgrading_masks_secret_env_values_and_keeps_everything_else(old_events):
    apps = migrate(AFTER)
    AuditEvent = apps.get_model("audit", "AuditEvent")
    data = {name: AuditEvent.objects.get(pk=pk).data for name, pk in old_events.items()}

    assert data["admin"] == {"env": [{"DB_PASSWORD": MASK}, {"DB_PASSWORD": MASK, "DIR": "/srv"}]}
    assert data["apply"] == {
        "name": "report",
        "via": "apply",
        "diff": {"env": [None, {"API_TOKEN": MASK}]},
    }
    assert data["deleted"] == {"env": [{"ssh_key": MASK, "PATH": "/bin"}, None]}
    assert data["plain"] == {"schedule": ["@daily", "@hourly"]}
    assert data["other"] == {"env": [{"API_TOKEN": "kept"}]}  # not a job event
    assert AuditEvent.objects.count() == 5
