"""Two indexes MariaDB and MySQL held twice, gone. Without partial indexes Django builds a
conditional index without its condition, so there:

- the fair key index `alkqueue_fair_key_idx` is a full index on (queue, fair_key), the very
  columns of the stand-in 0016 built beside it, `alkqueue_fair_key_full`: the stand-in goes,
  and the index stands in for itself (models.STAND_INS);
- `alkqueue_finished_other_idx` is a full index on finished_at, as `alkqueue_finished_at_idx`
  is: it goes, and `alkqueue_finished_at_idx` stands in for it.

Each cost an index write per row inserted (every enqueue; every finished job kept) and served
no query the other did not. Only on databases without partial indexes; the model state does
not change, so a later migration that removes `alkqueue_finished_other_idx` must skip its
DROP there (docs/databases.md, "Indexes").
"""

from django.db import migrations

DROPPED = [
    ("alkqueue_message", "alkqueue_fair_key_full", "(queue, fair_key)"),
    ("alkqueue_finishedjob", "alkqueue_finished_other_idx", "(finished_at)"),
]


def drop_duplicates(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    for table, name, _columns in DROPPED:
        schema_editor.execute(f"DROP INDEX {name} ON {table}")


def build_duplicates(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    for table, name, columns in DROPPED:
        schema_editor.execute(f"CREATE INDEX {name} ON {table} {columns}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0018_dead_letter_fair_key"),
    ]

    operations = [
        migrations.RunPython(drop_duplicates, build_duplicates, elidable=False, atomic=False),
    ]
