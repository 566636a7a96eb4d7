# The retention indexes (scheduler.housekeeping.retention): finished executions and log
# chunks, oldest first.
#
# Existing installations hold big execution and log tables. On PostgreSQL the
# indexes are built CONCURRENTLY, so the web process and the loop keep writing
# while they build (that cannot run inside a transaction: atomic = False). A
# build that was interrupted leaves an INVALID index behind; drop it
# (DROP INDEX CONCURRENTLY exec_finished / logchunk_created) and migrate
# again. SQLite builds them with a plain CREATE INDEX.

from django.db import migrations, models


class AddIndexConcurrently(migrations.AddIndex):
    """AddIndex, built with CREATE INDEX CONCURRENTLY on PostgreSQL."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, self.index, concurrently=True)
        else:
            schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, self.index, concurrently=True)
        else:
            schema_editor.remove_index(model, self.index)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0004_action_permissions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(fields=["finished_at"], name="exec_finished"),
        ),
        AddIndexConcurrently(
            model_name="logchunk",
            index=models.Index(fields=["created_at"], name="logchunk_created"),
        ),
    ]
