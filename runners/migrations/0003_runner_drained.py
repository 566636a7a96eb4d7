from django.db import migrations, models


def remember_drains(apps, schema_editor):
    """Runners drained before the field existed stay drained."""
    Runner = apps.get_model("runners", "Runner")
    Runner.objects.filter(state="draining").update(drained=True)


class Migration(migrations.Migration):
    dependencies = [
        ("runners", "0002_action_permissions"),
    ]

    operations = [
        migrations.AddField(
            model_name="runner",
            name="drained",
            field=models.BooleanField(
                default=False,
                help_text=(
                    "An operator drained it: no new work until resumed or the runner starts"
                    " afresh (a new session). Kept while it is offline."
                ),
            ),
        ),
        migrations.RunPython(remember_drains, migrations.RunPython.noop),
    ]
