"""Field snapshots and diffs for audited admin changes.

A diff is `{"field": [old, new]}` with JSON-safe values (foreign keys as
their primary key). Secrets never enter a snapshot, so they never reach the
audit trail.
"""

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

SECRET_MARKERS = ("secret", "password")


def is_secret(field_name):
    name = field_name.lower()
    return any(marker in name for marker in SECRET_MARKERS)


def audited_fields(model, exclude=()):
    """Concrete fields worth recording: no primary key, no auto timestamps, no secrets."""
    for field in model._meta.concrete_fields:
        if field.primary_key or field.name in exclude or is_secret(field.name):
            continue
        if isinstance(field, models.DateField) and (field.auto_now or field.auto_now_add):
            continue
        yield field


def json_safe(value):
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def snapshot(obj, exclude=()):
    """{field name: JSON-safe value} of an instance's audited fields."""
    return {
        field.name: json_safe(field.value_from_object(obj))
        for field in audited_fields(type(obj), exclude)
    }


def diff(old, new):
    """{"field": [old, new]} for every field whose value differs.

    `old` or `new` may be empty (a creation or a deletion): missing values
    are None.
    """
    names = list(new) + [name for name in old if name not in new]
    return {
        name: [old.get(name), new.get(name)] for name in names if old.get(name) != new.get(name)
    }
