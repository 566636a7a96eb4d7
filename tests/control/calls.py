"""Helpers for calling the management API in tests: keys by their scopes, and
a fingerprint of the whole database to show a refused call changed nothing."""

import hashlib

from django.apps import apps

from control.models import ApiKey

# When a key was last presented: written by any call the key authenticates,
# refused by the view or not, so not state a refused call may not change.
LAST_USED = "control.ApiKey.last_used_at"


def key(name, key_scopes, **fields):
    """(ApiKey, its `Authorization` header value)."""
    made, secret = ApiKey.issue(name, key_scopes, **fields)
    return made, f"Bearer {secret}"


def call(client, method, url, authorization=None, body=None):
    headers = {"Authorization": authorization} if authorization else {}
    if body is None:
        return getattr(client, method)(url, headers=headers)
    return getattr(client, method)(url, body, content_type="application/json", headers=headers)


def fingerprint(ignore=()):
    """{table: (row count, checksum of its rows)} over every model's table;
    `ignore` names columns as "app_label.Model.field" (informational ones
    such as a key's last_used_at)."""
    found = {}
    for model in apps.get_models(include_auto_created=True):
        fields = [
            f.attname
            for f in model._meta.concrete_fields
            if f"{model._meta.label}.{f.name}" not in ignore
        ]
        rows = list(model._default_manager.order_by("pk").values_list(*fields))
        digest = hashlib.sha256(repr(rows).encode()).hexdigest()
        found[model._meta.label] = (len(rows), digest)
    return found


def changed(before, after):
    return {
        table: (before[table], after[table]) for table in before if before[table] != after[table]
    }
