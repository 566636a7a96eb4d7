"""`croniq-admin export` as an operator runs it, a process on a SQLite
file: it prints a document `croniq-admin apply --dry-run` accepts and finds
nothing to change in, and it reads without taking the write lock, so a
writer holding it (the loop's tick, an apply) neither blocks it nor waits
for it."""

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from harness.processes import on_postgres, process_env
from scheduler.apply.document import apply
from tests.scheduler.export_world import SECRET_ENV, SOURCE, rich, with_secrets

ADMIN = Path(sys.executable).with_name("croniq-admin")


def croniq_admin(env, *args):
    return subprocess.run(
        [ADMIN, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def copied_to(path):
    """The test database, committed and migrated, copied to the file `path`
    (SQLite's backup: no migrate process to wait for), in WAL mode as
    Croniq's processes leave a database."""
    with closing(sqlite3.connect(path)) as target:
        connection.connection.backup(target)
        target.execute("PRAGMA journal_mode=WAL")


@pytest.mark.skipif(on_postgres(), reason="croniq-admin on a SQLite file: one machine's install")
@pytest.mark.django_db(transaction=True)
def test_the_export_of_a_sqlite_file_applies_as_no_change(tmp_path, monkeypatch, settings):
    with_secrets(monkeypatch, settings, tmp_path)
    apply(rich(tmp_path), now=timezone.now(), source=SOURCE, managed_source=SOURCE)
    database = tmp_path / "croniq.sqlite3"
    copied_to(database)
    env = process_env(f"sqlite:///{database}", CRONIQ_SECRETS_DIR=tmp_path, **SECRET_ENV)

    writer = sqlite3.connect(database, isolation_level=None)
    with closing(writer):
        writer.execute("BEGIN IMMEDIATE")  # the write lock, held while the export reads
        exported = croniq_admin(env, "export")
        writer.execute("ROLLBACK")
    assert exported.returncode == 0, exported.stderr
    assert "warning: job nightly: env API_TOKEN is written out as stored" in exported.stderr

    document = tmp_path / "exported.yaml"
    document.write_text(exported.stdout)
    planned = croniq_admin(env, "apply", str(document), "--dry-run", "--source", SOURCE)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout == "nothing to change: everything is as the file says\n"
