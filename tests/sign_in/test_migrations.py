"""allauth's migrations upgrade a wave-2 database: its users, groups and
sessions stay, its tables start empty, and the users sign in as before."""

import pytest
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate
from tests.sign_in.conftest import PASSWORD, log_in, signed_in

pytestmark = pytest.mark.django_db(transaction=True)

ALLAUTH = [("account", None), ("mfa", None), ("socialaccount", None)]
# The last migration of a wave-2 database.
WAVE_2 = [("dashboard", "0006_secret_groups")]
TABLES = {"account_emailaddress", "mfa_authenticator", "socialaccount_socialaccount"}


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_a_wave_2_database_gains_allauths_tables_and_its_users_still_sign_in(client):
    MigrationExecutor(connection).migrate(ALLAUTH)
    old = migrate(WAVE_2)
    assert not TABLES & set(connection.introspection.table_names())
    Group = old.get_model("auth", "Group")
    viewers, _ = Group.objects.get_or_create(name="Croniq viewers")
    user = old.get_model("auth", "User").objects.create(
        username="ops", password=make_password(PASSWORD), is_staff=True, email="ops@example.com"
    )
    user.groups.add(viewers)
    try:
        new = migrate(everything())
        assert set(connection.introspection.table_names()) >= TABLES
        User = new.get_model("auth", "User")
        assert list(User.objects.get(username="ops").groups.values_list("name", flat=True)) == [
            "Croniq viewers"
        ]
        assert new.get_model("mfa", "Authenticator").objects.count() == 0
        assert new.get_model("account", "EmailAddress").objects.count() == 0
        log_in(client)
        assert signed_in(client)
    finally:
        migrate(everything())
