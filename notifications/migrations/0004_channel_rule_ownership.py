"""Channels and rules share the ownership of jobs and calendars
(core.ownership): `managed_by` says who owns the row (apply, api, admin) and
`managed_source` which apply source (a file's stem) manages it.

Until now `managed_by` held the name apply stamped a row with (the file's
stem or --source, or, from older applies, its path or "api:<key>"), empty
for a row made in the admin. A stamped row becomes apply's, of that source;
a stamp too long to be a source (a long path) leaves it apply's but of no
file, as jobs and calendars became (scheduler 0009): no --prune deletes it,
and the next apply that lists it claims it.
"""

from django.db import migrations, models

SOURCE_CHARS = 100  # managed_source's max_length


def to_owners(apps, schema_editor):
    for name in ("Channel", "Rule"):
        model = apps.get_model("notifications", name)
        for pk, stamp in model.objects.exclude(managed_by="").values_list("pk", "managed_by"):
            source = stamp if len(stamp) <= SOURCE_CHARS else ""
            model.objects.filter(pk=pk).update(managed_by="apply", managed_source=source)
        model.objects.filter(managed_by="").update(managed_by="admin")


def to_stamps(apps, schema_editor):
    for name in ("Channel", "Rule"):
        model = apps.get_model("notifications", name)
        model.objects.exclude(managed_by="apply").update(managed_by="")
        for pk, source in model.objects.filter(managed_by="apply").values_list(
            "pk", "managed_source"
        ):
            model.objects.filter(pk=pk).update(managed_by=source or "apply")


def managed_source():
    return models.CharField(
        blank=True,
        default="",
        help_text="The apply source (a file's stem, or apply --source) that manages "
        "this row: apply --prune of that source alone deletes it.",
        max_length=100,
        verbose_name="managed by file",
    )


def managed_by():
    return models.CharField(
        choices=[
            ("apply", "apply (jobs as code)"),
            ("api", "the management API"),
            ("admin", "the admin"),
        ],
        default="admin",
        help_text="apply updates and prunes only what it manages; saving an "
        "apply-managed row here adopts it (apply no longer prunes it).",
        max_length=10,
        verbose_name="managed by",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0003_channel_username"),
    ]

    operations = [
        migrations.AddField(model_name="channel", name="managed_source", field=managed_source()),
        migrations.AddField(model_name="rule", name="managed_source", field=managed_source()),
        # Before managed_by narrows to 10 characters: it still holds the stamps.
        migrations.RunPython(to_owners, to_stamps, elidable=False),
        migrations.AlterField(model_name="channel", name="managed_by", field=managed_by()),
        migrations.AlterField(model_name="rule", name="managed_by", field=managed_by()),
    ]
