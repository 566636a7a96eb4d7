"""The loop says once at start when PostgreSQL's autovacuum is off."""

import logging

import pytest
from django.db import connection

from scheduler.housekeeping import vacuum

pytestmark = pytest.mark.django_db


def server_autovacuum():
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0]


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's setting")
def test_the_warning_follows_the_servers_setting(caplog):
    off = server_autovacuum() != "on"

    with caplog.at_level(logging.WARNING, logger="croniq.scheduler"):
        warned = vacuum.warn_if_autovacuum_off()

    assert warned is off
    assert (vacuum.WARNING in caplog.messages) is off


def test_sqlite_has_no_autovacuum_to_warn_about(django_assert_num_queries):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite")
    with django_assert_num_queries(0):
        assert vacuum.warn_if_autovacuum_off() is False
