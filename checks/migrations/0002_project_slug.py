"""A check's project is a slug, indexed, like every project row's
(docs/design.md §11); the values stay."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("checks", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="check",
            name="project",
            field=models.SlugField(
                default="default",
                db_default="default",
                help_text="The project (team) it belongs to: who may see and change it.",
                max_length=100,
            ),
        ),
    ]
