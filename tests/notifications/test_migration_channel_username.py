"""0003 upgrades a database that holds channels: none posts under a name."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("notifications", "0002_incident_keys")]
AFTER = [("notifications", "0003_channel_username")]


def test_existing_channels_keep_their_settings_and_get_no_username():
    old = migrate(BEFORE)
    Channel = old.get_model("notifications", "Channel")
    chat = Channel.objects.create(
        name="team-chat", kind="slack", url="https://chat.example.com/hooks/x", format="discord"
    )
    Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    try:
        new = migrate(AFTER)
        upgraded = new.get_model("notifications", "Channel").objects.get(pk=chat.pk)
        assert (upgraded.username, upgraded.format, upgraded.url) == (
            "",
            "discord",
            "https://chat.example.com/hooks/x",
        )
        assert new.get_model("notifications", "Channel").objects.count() == 2
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
