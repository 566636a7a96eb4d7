"""Channels and rules belong to a project (docs/design.md §11): every
stored one to `default`, by the column's default."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0005_rule_checks"),
    ]

    operations = [
        migrations.AddField(
            model_name="channel",
            name="project",
            field=models.SlugField(
                default="default",
                db_default="default",
                help_text="The project (team) it belongs to: who may see and change it.",
                max_length=100,
            ),
        ),
        migrations.AddField(
            model_name="rule",
            name="project",
            field=models.SlugField(
                default="default",
                db_default="default",
                help_text="The project (team) it belongs to: who may see and change it.",
                max_length=100,
            ),
        ),
    ]
