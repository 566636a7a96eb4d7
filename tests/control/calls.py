"""Helpers for calling the management API in tests: keys by their scopes, and
a fingerprint of the whole database to show a refused call changed nothing."""

import functools
import hashlib

from django.apps import apps
from django.db import connection

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
    such as a key's last_used_at). The rows as the database gives them,
    read with one plain query a table: through the ORM, the 80-odd queries
    cost 36 ms of CPU, and the scope matrix and the fuzz tests take one
    before and after every call."""
    found = {}
    with connection.cursor() as cursor:
        for label, sql in table_queries(tuple(sorted(ignore))):
            cursor.execute(sql)
            rows = cursor.fetchall()
            found[label] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return found


@functools.cache
def table_queries(ignore):
    """(model label, SELECT of its columns but `ignore`'s, in key order)
    for every model's table."""
    quote = connection.ops.quote_name
    queries = []
    for model in apps.get_models(include_auto_created=True):
        meta = model._meta
        columns = [
            quote(f.column) for f in meta.concrete_fields if f"{meta.label}.{f.name}" not in ignore
        ]
        table, key = quote(meta.db_table), quote(meta.pk.column)
        queries.append((meta.label, f"SELECT {', '.join(columns)} FROM {table} ORDER BY {key}"))
    return queries


def changed(before, after):
    return {
        table: (before[table], after[table]) for table in before if before[table] != after[table]
    }
