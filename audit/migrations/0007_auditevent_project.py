# Audit events name the project of the row they are about (docs/design.md
# §11). Events written before keep "" (about no project): only global keys
# read them over the API. Its index: 0008.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0006_alter_auditevent_actor_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="project",
            field=models.CharField(blank=True, db_default="", default="", max_length=100),
        ),
    ]
