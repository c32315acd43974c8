"""Stand-ins for what Django leaves out of the live table where the database has no partial
indexes (MySQL, MariaDB).

There Django builds alkqueue_lease_idx and alkqueue_expiry_idx without their conditions
(models.W037), which serves as well, but leaves out the claim index (an index on an
expression, models.W043) and the unique key's constraint (models.W036). The stand-ins: the
unclaimed rows of a queue in handout order for the ORM dialect's claim (sql/orm.py), and one
live job per (queue, unique key), which holds because these databases let any number of rows
share a NULL key.
"""

from django.db import migrations

TABLE = "alkqueue_message"
INDEXES = {"alkqueue_claim_full_idx": "(queue, claim_token, priority DESC, run_at, id)"}
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
    dependencies = [("django_alkqueue", "0008_admin_permissions")]
    # DDL on MySQL commits by itself, so it cannot run inside the migration's transaction.
    operations = [migrations.RunPython(create, drop, elidable=False, atomic=False)]
