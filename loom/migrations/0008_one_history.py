"""Undo and redo in one table: the undo entries stay as they are (same ids, so an
expansion's `undo_entry` still points at its step) with stack "undo"; every redo
entry is copied onto the "redo" stack in its order (oldest first, so the newest is
still redone first), with its user, label, data and time; then the redo table goes."""

import django.db.models.deletion
from django.db import migrations, models

# One INSERT … SELECT each way: the ids are drawn in the SELECT's order, so the stack
# keeps its order, and every column (created_at included) is copied as it is.
REDO_INTO_HISTORY = """
    INSERT INTO loom_undoentry (tree_id, stack, user_id, action, label, data, created_at)
    SELECT tree_id, 'redo', user_id, action, label, data, created_at
    FROM loom_redoentry ORDER BY id
"""
HISTORY_INTO_REDO = """
    INSERT INTO loom_redoentry (tree_id, user_id, action, label, data, created_at)
    SELECT tree_id, user_id, action, label, data, created_at
    FROM loom_undoentry WHERE stack = 'redo' ORDER BY id;
    DELETE FROM loom_undoentry WHERE stack = 'redo';
"""


class Migration(migrations.Migration):
    dependencies = [("loom", "0007_versions")]

    operations = [
        migrations.AddField(
            model_name="undoentry",
            name="stack",
            field=models.CharField(
                choices=[("undo", "undo"), ("redo", "redo")], default="undo", max_length=4
            ),
        ),
        migrations.AlterField(
            model_name="undoentry",
            name="tree",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.DB_CASCADE,
                related_name="history",
                to="loom.tree",
            ),
        ),
        migrations.RemoveIndex(model_name="undoentry", name="loom_undo_latest"),
        migrations.AddIndex(
            model_name="undoentry",
            index=models.Index(fields=["tree", "stack", "-id"], name="loom_history_latest"),
        ),
        migrations.AddConstraint(
            model_name="undoentry",
            constraint=models.CheckConstraint(
                condition=models.Q(stack__in=["undo", "redo"]), name="loom_history_stack"
            ),
        ),
        migrations.RunSQL(REDO_INTO_HISTORY, HISTORY_INTO_REDO),
        migrations.DeleteModel(name="RedoEntry"),
    ]
