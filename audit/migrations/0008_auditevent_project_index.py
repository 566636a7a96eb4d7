# The index of a project's events, newest first (audit.models.AuditEvent).
# It holds only the events of a project (none yet), but its build still
# reads the whole table: on PostgreSQL it is built CONCURRENTLY, so the web
# processes and the loop keep writing events meanwhile (that cannot run in a
# transaction: atomic = False). A build that was interrupted leaves an
# INVALID index behind; drop it (DROP INDEX CONCURRENTLY audit_project_id)
# and migrate again. SQLite builds it with a plain CREATE INDEX.

from django.db import migrations, models


class AddIndexConcurrently(migrations.AddIndex):
    """AddIndex, built with CREATE INDEX CONCURRENTLY on PostgreSQL."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.add_index(model, self.index, **concurrently(schema_editor))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.remove_index(model, self.index, **concurrently(schema_editor))


def concurrently(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0007_auditevent_project"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="auditevent",
            index=models.Index(
                condition=models.Q(("project", ""), _negated=True),
                fields=["project", "id"],
                name="audit_project_id",
            ),
        ),
    ]
