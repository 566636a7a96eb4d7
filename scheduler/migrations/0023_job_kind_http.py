"""Job kinds (docs/design.md §15): `kind` (shell or http) and `http`, the
request an http job makes; `command` may be empty, as an http job's is.
Every stored job becomes a shell job with no request (`kind` "shell",
`http` {}), set by the database's defaults: nothing else changes."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0022_job_webhook"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="kind",
            field=models.CharField(
                choices=[
                    ("shell", "shell: a command under sh -c"),
                    ("http", "http: a request the runner makes"),
                ],
                db_default="shell",
                default="shell",
                help_text="What a run does: run the command (shell) or make the HTTP "
                "request (http).",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="http",
            field=models.JSONField(
                blank=True,
                db_default={},
                default=dict,
                help_text="With kind http, the request: {method, url, headers, body, "
                "expect_status, timeout}. Empty for kind shell.",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="command",
            field=models.TextField(
                blank=True,
                help_text="Shell command the runner executes (sh -c); required for kind "
                "shell, empty for kind http.",
            ),
        ),
    ]
