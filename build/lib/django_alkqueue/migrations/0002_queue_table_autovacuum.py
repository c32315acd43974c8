"""Per-table autovacuum for the live table (PostgreSQL only).

A queue table churns: every job is an insert, an update or two and a delete. With the default
scale factor (20% of live rows) a deep backlog lets hundreds of thousands of dead tuples pile
up at the head of the claim index before autovacuum runs, and claims slow down several-fold.
Vacuuming after a fixed number of dead tuples, at full speed, keeps the head clean.
"""

from django.db import migrations

TABLE = "alkqueue_message"
SETTINGS = {
    "autovacuum_vacuum_scale_factor": "0.0",
    "autovacuum_vacuum_threshold": "5000",
    "autovacuum_vacuum_insert_scale_factor": "0.0",
    "autovacuum_vacuum_insert_threshold": "5000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_cost_delay": "0",
}


def tune(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    options = ", ".join(f"{k} = {v}" for k, v in SETTINGS.items())
    schema_editor.execute(f"ALTER TABLE {TABLE} SET ({options})")


def untune(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER TABLE {TABLE} RESET ({', '.join(SETTINGS)})")


class Migration(migrations.Migration):
    dependencies = [("django_alkqueue", "0001_initial")]
    operations = [migrations.RunPython(tune, untune, elidable=False)]
