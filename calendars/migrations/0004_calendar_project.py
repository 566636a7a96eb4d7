"""Calendars belong to a project (docs/design.md §11): every stored one
to `default`, by the column's default."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0003_calendar_managed_source"),
    ]

    operations = [
        migrations.AddField(
            model_name="calendar",
            name="project",
            field=models.SlugField(
                default="default",
                db_default="default",
                help_text="The project (team) it belongs to: who may see and change it.",
                max_length=100,
            ),
        ),
    ]
