"""Stand-ins for the live table's partial indexes, where the database has none (MySQL, MariaDB).

Django leaves a conditional index out on such a database, and with it the unique key's
constraint. These full indexes serve the ORM dialect's claim (sql/orm.py) the same way:
unclaimed rows of a queue in handout order; lapsed leases of a queue (an unclaimed row has
no lease, so it is not in the range); expiry; and one live job per (queue, unique key),
which holds because these databases let any number of rows share a NULL key.
"""

from django.db import migrations

TABLE = "alkqueue_message"
INDEXES = {
    "alkqueue_claim_full_idx": "(queue, claim_token, priority DESC, run_at, id)",
    "alkqueue_lease_full_idx": "(queue, lease_expires_at)",
    "alkqueue_expiry_full_idx": "(expires_at)",
}
UNIQUE_KEY = "alkqueue_unique_key_full"


def _without_partial_indexes(schema_editor):
    return not schema_editor.connection.features.supports_partial_indexes


def create(apps, schema_editor):
    if not _without_partial_indexes(schema_editor):
        return
    for name, columns in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX {name} ON {TABLE} {columns}")
    schema_editor.execute(f"CREATE UNIQUE INDEX {UNIQUE_KEY} ON {TABLE} (queue, unique_key)")


def drop(apps, schema_editor):
    if not _without_partial_indexes(schema_editor):
        return
    for name in [*INDEXES, UNIQUE_KEY]:
        schema_editor.execute(f"DROP INDEX {name} ON {TABLE}")


class Migration(migrations.Migration):
    dependencies = [("django_alkqueue", "0007_task_result_priority_and_run_after")]
    # DDL on MySQL commits by itself, so it cannot run inside the migration's transaction.
    operations = [migrations.RunPython(create, drop, elidable=False, atomic=False)]
