"""An API key may be bound to one project (docs/design.md §11); every
stored key stays global (empty)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("control", "0002_apikey_parent"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="project",
            field=models.SlugField(
                blank=True,
                default="",
                db_default="",
                help_text="Bind the key to one project (empty: every project).",
                max_length=100,
            ),
        ),
    ]
