"""`core.db.snapshot`: reads that see one picture of the database while
others commit (what `croniq-admin export` reads its configuration under).
SQLite's side, a deferred transaction a writer does not wait for, is
checked on a real file by tests/scheduler/test_export_command.py."""

import threading

import pytest
from django.db import connection, connections

from calendars.models import Calendar
from core import db


def create_elsewhere(name):
    """Create a calendar on another connection, committed when it returns."""

    def create():
        try:
            Calendar.objects.create(name=name)
        finally:
            connections.close_all()

    thread = threading.Thread(target=create)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_commit_after_the_first_read_is_not_seen_until_the_snapshot_ends():
    if connection.vendor != "postgresql":
        pytest.skip("READ COMMITTED would show the commit: a PostgreSQL matter")
    Calendar.objects.create(name="before")

    with db.snapshot():
        first = sorted(Calendar.objects.values_list("name", flat=True))
        create_elsewhere("during")
        second = sorted(Calendar.objects.values_list("name", flat=True))

    assert first == second == ["before"]
    assert sorted(Calendar.objects.values_list("name", flat=True)) == ["before", "during"]


@pytest.mark.django_db
def test_inside_a_transaction_it_reads_in_that_transaction():
    Calendar.objects.create(name="mine")

    with db.snapshot():
        assert list(Calendar.objects.values_list("name", flat=True)) == ["mine"]
