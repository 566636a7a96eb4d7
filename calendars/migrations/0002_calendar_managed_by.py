from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0001_initial"),
    ]

    operations = [
        # Existing calendars were made in the admin or by apply; nothing tells
        # which, so they start as "admin": apply takes back what it lists on
        # its next run, and never prunes the rest.
        migrations.AddField(
            model_name="calendar",
            name="managed_by",
            field=models.CharField(
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
            ),
        ),
    ]
