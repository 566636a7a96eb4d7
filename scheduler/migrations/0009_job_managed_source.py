from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0008_triggers"),
        ("calendars", "0003_calendar_managed_source"),
    ]

    operations = [
        # Nothing tells which file applied an existing job, so it has none:
        # the next apply that lists it claims it, and no --prune deletes it
        # before then (as calendars 0002 did for managed_by).
        migrations.AddField(
            model_name="job",
            name="managed_source",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The apply source (a file's stem, or apply --source) that manages "
                "this row: apply --prune of that source alone deletes it.",
                max_length=100,
                verbose_name="managed by file",
            ),
        ),
    ]
