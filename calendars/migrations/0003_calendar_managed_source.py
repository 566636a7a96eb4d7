from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0002_calendar_managed_by"),
    ]

    operations = [
        # Nothing tells which file applied an existing calendar, so it has
        # none: the next apply that lists it claims it, and no --prune
        # deletes it before then.
        migrations.AddField(
            model_name="calendar",
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
