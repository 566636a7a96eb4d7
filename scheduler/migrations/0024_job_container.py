"""Container jobs (docs/design.md §15): the kind `container` and the field
`container`, what the runner's docker or podman runs. Every stored job
keeps its kind and gets an empty `container` ({}, the database's default):
nothing else changes. The other fields' help texts name the new kind."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0023_job_kind_http"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="container",
            field=models.JSONField(
                blank=True,
                db_default={},
                default=dict,
                help_text="With kind container, what the engine runs: {image, args, env, pull, "
                "network}. Empty for the other kinds.",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="kind",
            field=models.CharField(
                choices=[
                    ("shell", "shell: a command under sh -c"),
                    ("http", "http: a request the runner makes"),
                    ("container", "container: an image the runner's docker or podman runs"),
                ],
                db_default="shell",
                default="shell",
                help_text="What a run does: run the command (shell), make the HTTP request "
                "(http) or run the container (container).",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="command",
            field=models.TextField(
                blank=True,
                help_text="Shell command the runner executes (sh -c); required for kind "
                "shell, empty for the other kinds.",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="http",
            field=models.JSONField(
                blank=True,
                db_default={},
                default=dict,
                help_text="With kind http, the request: {method, url, headers, body, "
                "expect_status, timeout}. Empty for the other kinds.",
            ),
        ),
    ]
