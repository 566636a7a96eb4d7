"""control 0002 upgrades a database holding API keys: they keep working,
with no recorded parent (a key minted before the upgrade is not revoked
with the key that minted it), and keys minted after it record theirs."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from control import keys
from control.models import ApiKey, hash_secret
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
BEFORE = [("control", "0001_initial")]
AFTER = [("control", "0002_apikey_parent")]


def test_keys_stored_before_the_upgrade_keep_working_without_a_parent():
    old = migrate(BEFORE)
    OldKey = old.get_model("control", "ApiKey")
    OldKey.objects.create(name="ci", secret_hash=hash_secret("crk_ci"), scopes=["admin"])
    OldKey.objects.create(
        name="deploy",
        secret_hash=hash_secret("crk_deploy"),
        scopes=["jobs:read"],
        created_by="key ci",
    )
    try:
        new = migrate(AFTER)
        stored = new.get_model("control", "ApiKey").objects.order_by("name")
        assert list(stored.values_list("name", "parent")) == [("ci", None), ("deploy", None)]

        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        ci = ApiKey.objects.authenticate("crk_ci", NOW)
        child, _ = keys.mint(ci, "nightly", ["jobs:read"], None, NOW, actor=ci)
        assert child.parent == ci
        assert keys.revoke(ci, NOW) == 2  # ci and nightly; deploy has no recorded parent
        assert ApiKey.objects.authenticate("crk_deploy", NOW).name == "deploy"
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
