"""Mask secret-looking job env values in the audit events already recorded.

New events are masked when they are written (audit.changes); events from
before held the values in clear. The rule is copied here, not imported, so
this migration keeps meaning what it meant when it was written.
"""

from django.db import migrations

MASK = "********"
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")
JOB_ACTIONS = ["job.created", "job.changed", "job.deleted"]
BATCH = 500


def is_secret_env(name):
    name = str(name).upper()
    return any(name == word or name.endswith("_" + word) for word in SECRET_WORDS)


def masked_env(env):
    if not isinstance(env, dict):
        return env
    return {name: MASK if is_secret_env(name) else value for name, value in env.items()}


def mask_event_data(data):
    """Mask in place; whether anything changed. Admin events hold the diff
    itself ({"env": [old, new]}), `apply` events under "diff"."""
    changed = False
    for diff in (data, data.get("diff")):
        if not isinstance(diff, dict) or not isinstance(diff.get("env"), list):
            continue
        masked = [masked_env(side) for side in diff["env"]]
        if masked != diff["env"]:
            diff["env"] = masked
            changed = True
    return changed


def mask_recorded_events(apps, schema_editor):
    AuditEvent = apps.get_model("audit", "AuditEvent")
    events = AuditEvent.objects.filter(action__in=JOB_ACTIONS).only("id", "data").order_by("id")
    batch = []
    for event in events.iterator(chunk_size=BATCH):
        if isinstance(event.data, dict) and mask_event_data(event.data):
            batch.append(event)
        if len(batch) == BATCH:
            AuditEvent.objects.bulk_update(batch, ["data"])
            batch = []
    AuditEvent.objects.bulk_update(batch, ["data"])


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0004_counter_shards"),
    ]

    operations = [
        # Masked values cannot be restored: going back leaves them masked.
        migrations.RunPython(mask_recorded_events, migrations.RunPython.noop),
    ]
