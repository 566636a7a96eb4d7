from django.db import migrations


class Migration(migrations.Migration):
    """Each operator action on runners and tokens gets its own permission."""

    dependencies = [
        ("runners", "0001_initial"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="runner",
            options={
                "ordering": ["name"],
                "permissions": [
                    ("drain_runner", "Can drain and resume a runner"),
                    ("forget_runner", "Can forget a runner"),
                ],
            },
        ),
        migrations.AlterModelOptions(
            name="runnertoken",
            options={"permissions": [("revoke_runnertoken", "Can revoke a runner token")]},
        ),
    ]
