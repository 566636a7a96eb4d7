from django.db import migrations


class Migration(migrations.Migration):
    """Each operator action on jobs and executions gets its own permission."""

    dependencies = [
        ("scheduler", "0003_job_error"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="job",
            options={
                "ordering": ["name"],
                "permissions": [
                    ("run_job", "Can run a job now"),
                    ("pause_job", "Can pause and resume a job"),
                ],
            },
        ),
        migrations.AlterModelOptions(
            name="execution",
            options={
                "ordering": ["-scheduled_for", "-attempt"],
                "permissions": [
                    ("cancel_execution", "Can cancel an execution"),
                    ("retry_execution", "Can retry an execution"),
                ],
            },
        ),
    ]
