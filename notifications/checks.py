"""System checks of stored channels (`manage.py migrate` and `manage.py check
--database default` run them).

Channels saved before their secret references were limited to
`${CRONIQ_SECRET_*}` and files under CRONIQ_SECRETS_DIR keep what they hold:
their deliveries fail with the reason recorded (notifications.secrets).
Rewriting them in a migration would guess at names the operator chooses,
and disabling them would silence alerts without a word, so the upgrade
says which channels to change instead, where the operator runs it.
"""

from collections.abc import Iterator
from typing import Any

from django.core import checks
from django.db import DatabaseError, connections

from notifications import secrets

STORED_REFERENCE_REFUSED = "croniq.W101"


@checks.register(checks.Tags.database)
def stored_channel_references(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A warning for each stored channel whose references no longer resolve."""
    found = []
    for alias in databases or ():
        found += [
            checks.Warning(
                f"channel {name!r}: {problem}",
                hint="Its deliveries fail until it is changed: name the variable "
                f"{secrets.ENV_PREFIX}..., or put the file under CRONIQ_SECRETS_DIR, "
                "then update the channel (admin or apply).",
                id=STORED_REFERENCE_REFUSED,
            )
            for name, problem in refused_references(alias)
        ]
    return found


def refused_references(alias: str) -> list[tuple[str, str]]:
    """(channel name, "field: why") of the stored channels on database `alias`."""
    from notifications.models import Channel

    connection = connections[alias]
    try:
        if Channel._meta.db_table not in connection.introspection.table_names():
            return []  # not migrated yet
        channels = list(Channel.objects.using(alias).only("name", "url", "secret", "headers"))
    except DatabaseError:
        return []  # no database to look at: nothing to warn about
    return [
        (channel.name, f"{field}: {problem}")
        for channel in channels
        for field, problem in channel_problems(channel)
    ]


def channel_problems(channel: Any) -> Iterator[tuple[str, str]]:
    texts = [("url", channel.url), ("secret", channel.secret)]
    texts += [(f"headers: {name}", value) for name, value in (channel.headers or {}).items()]
    for field, text in texts:
        problem = secrets.forbidden(text) if isinstance(text, str) and text else None
        if problem:
            yield field, problem
