"""Jobs' webhooks (docs/design.md §14): `webhook`, its key (unique: a
webhook call's only lookup) and `webhook_secret`, and the trigger `webhook`.
Every stored job gets no webhook: `webhook_key` NULL, which the unique
index allows any number of times on both databases."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0021_job_requires"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="webhook",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Give the job a URL that runs it when POSTed to, with no API key "
                "(the URL is the secret: regenerate it to revoke it).",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="webhook_key",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="Random; the webhook URL is it signed with SECRET_KEY "
                "(scheduler.jobs.webhooks), so this alone runs nothing. Empty without a "
                "webhook.",
                max_length=32,
                null=True,
                unique=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="webhook_secret",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="Webhook calls must carry a Croniq-Signature made with this secret, "
                "written as a reference: ${CRONIQ_SECRET_NAME} or file:/run/secrets/name. "
                "Empty: the URL alone runs the job.",
                max_length=500,
            ),
        ),
        migrations.AlterField(
            model_name="execution",
            name="trigger",
            field=models.CharField(
                choices=[
                    ("schedule", "schedule"),
                    ("manual", "manual"),
                    ("retry", "retry"),
                    ("catch_up", "catch-up"),
                    ("backfill", "backfill"),
                    ("replay", "replay of a dead letter"),
                    ("chain", "chain: an upstream job's run settled"),
                    ("register", "register: a runner started (run on register)"),
                    ("webhook", "webhook: the job's webhook URL was called"),
                ],
                default="schedule",
                max_length=10,
            ),
        ),
    ]
