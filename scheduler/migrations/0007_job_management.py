from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0002_calendar_managed_by"),
        ("scheduler", "0006_job_health_and_owner"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="paused_until",
            field=models.DateTimeField(
                blank=True, help_text="A paused job resumes by itself at this instant.", null=True
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="pause_reason",
            field=models.CharField(blank=True, help_text="Why it is paused.", max_length=200),
        ),
        # Existing jobs start as "admin" (see calendars 0002): apply takes back
        # what it lists on its next run, and never prunes the rest.
        migrations.AddField(
            model_name="job",
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
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(paused_until__isnull=False),
                fields=["paused_until"],
                name="job_pause_ends",
            ),
        ),
    ]
