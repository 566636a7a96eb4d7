from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="pool",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="notification",
            name="runner_name",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("name", "incident.grouped")),
                fields=["channel", "pool", "runner_name"],
                name="notification_incident",
            ),
        ),
    ]
