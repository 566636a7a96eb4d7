"""The secrets store's migrations upgrade a database holding wave-2 rows:
jobs keep their `env` as stored, the store starts empty, and the Croniq
admins (alone) gain its permissions."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("dashboard", "0005_check_groups")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def granted(group):
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


def test_jobs_survive_the_store_starts_empty_and_only_admins_gain_it():
    MigrationExecutor(connection).migrate([("dashboard", "0005_check_groups"), ("vault", None)])
    old = migrate(BEFORE)
    assert "vault_secret" not in connection.introspection.table_names()
    # A wave-2 database has the three groups (a transactional test's flush
    # may have emptied this one since its migrations ran).
    for name in ("Croniq viewers", "Croniq operators", "Croniq admins"):
        old.get_model("auth", "Group").objects.get_or_create(name=name)
    Job = old.get_model("scheduler", "Job")
    job = Job.objects.create(
        name="sync",
        schedule="@hourly",
        command="./sync",
        next_run_at=T0,
        env={"DB_PASSWORD": "hunter2", "LITERAL": "${secret:not-a-reference-then}"},
    )
    try:
        new = migrate(everything())
        assert new.get_model("scheduler", "Job").objects.get(pk=job.pk).env == {
            "DB_PASSWORD": "hunter2",
            "LITERAL": "${secret:not-a-reference-then}",
        }
        assert new.get_model("vault", "Secret").objects.count() == 0
        Group = new.get_model("auth", "Group")
        assert {"vault.add_secret", "vault.change_secret", "vault.delete_secret"} <= granted(
            Group.objects.get(name="Croniq admins")
        )
        for name in ("Croniq viewers", "Croniq operators"):
            assert not {p for p in granted(Group.objects.get(name=name)) if p.startswith("vault.")}
    finally:
        migrate(everything())
