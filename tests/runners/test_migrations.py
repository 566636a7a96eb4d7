"""Upgrading a database that already holds runners."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
BEFORE = ("runners", "0002_action_permissions")
AFTER = ("runners", "0003_runner_drained")


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor.loader.project_state([target]).apps


@pytest.fixture
def latest_schema_after():
    """Later tests get the fully migrated schema back."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("latest_schema_after")
def test_runners_drained_before_the_upgrade_stay_drained_and_the_others_do_not():
    old = migrate(BEFORE)
    Runner = old.get_model("runners", "Runner")
    for name, state in [("a", "online"), ("b", "draining"), ("c", "offline")]:
        Runner.objects.create(
            name=name, session=f"s-{name}", state=state, registered_at=NOW, last_seen_at=NOW
        )

    new = migrate(AFTER)

    rows = new.get_model("runners", "Runner").objects.order_by("name")
    assert [(r.name, r.state, r.drained) for r in rows] == [
        ("a", "online", False),
        ("b", "draining", True),
        ("c", "offline", False),
    ]
