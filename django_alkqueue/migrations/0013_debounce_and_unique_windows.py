"""Debounced jobs and unique keys held for a window (docs/queues.md, "Debounce" and
"Unique windows").

- `debounce_key` and `debounce_deadline` on the live table, with one unclaimed job per
  (queue, debounce key): a claim clears the key, so the constraint counts only the job still
  open to updates in place. MySQL and MariaDB have no partial index (models.W036); a full
  unique index stands in, which holds because these databases let rows share a NULL key.
- `UniqueWindow`: a unique key taken for `unique_for`, kept past its job's end.
"""

from django.db import migrations, models

TABLE = "alkqueue_message"
DEBOUNCE_KEY_STAND_IN = "alkqueue_debounce_key_full"


def create_stand_in(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    schema_editor.execute(
        f"CREATE UNIQUE INDEX {DEBOUNCE_KEY_STAND_IN} ON {TABLE} (queue, debounce_key)"
    )


def drop_stand_in(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    schema_editor.execute(f"DROP INDEX {DEBOUNCE_KEY_STAND_IN} ON {TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0012_refingerprint_identifiers"),
    ]

    operations = [
        migrations.CreateModel(
            name="UniqueWindow",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100, verbose_name="queue")),
                ("unique_key", models.CharField(max_length=255, verbose_name="unique key")),
                ("job_id", models.BigIntegerField(verbose_name="job id")),
                ("taken_at", models.DateTimeField(verbose_name="taken at")),
                ("lapses_at", models.DateTimeField(verbose_name="lapses at")),
            ],
            options={
                "verbose_name": "unique window",
                "verbose_name_plural": "unique windows",
                "db_table": "alkqueue_uniquewindow",
            },
        ),
        migrations.AddField(
            model_name="queuemessage",
            name="debounce_deadline",
            field=models.DateTimeField(blank=True, null=True, verbose_name="debounce deadline"),
        ),
        migrations.AddField(
            model_name="queuemessage",
            name="debounce_key",
            field=models.CharField(
                blank=True, max_length=255, null=True, verbose_name="debounce key"
            ),
        ),
        migrations.AddConstraint(
            model_name="queuemessage",
            constraint=models.UniqueConstraint(
                condition=models.Q(("debounce_key__isnull", False)),
                fields=("queue", "debounce_key"),
                name="alkqueue_open_debounce_key",
            ),
        ),
        migrations.AddIndex(
            model_name="uniquewindow",
            index=models.Index(fields=["lapses_at"], name="alkqueue_window_lapse_idx"),
        ),
        migrations.AddConstraint(
            model_name="uniquewindow",
            constraint=models.UniqueConstraint(
                fields=("queue", "unique_key"), name="alkqueue_unique_window_key"
            ),
        ),
        # DDL on MySQL commits by itself, so it cannot run inside the migration's transaction.
        migrations.RunPython(create_stand_in, drop_stand_in, elidable=False, atomic=False),
    ]
