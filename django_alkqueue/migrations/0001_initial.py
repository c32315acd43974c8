"""The app's schema in one migration (the history before 1.0 was squashed: the project had
no users to migrate).

Two operations Django cannot write from the models run after the tables exist:

- `tune_autovacuum` (PostgreSQL only): per-table autovacuum for the live table. A queue table
  churns: every job is an insert, an update or two and a delete. With the default scale
  factor (20% of live rows) a deep backlog lets dead tuples pile up at the head of the claim
  index before autovacuum runs, and claims slow down several-fold. Vacuuming after a fixed
  number of dead tuples, at full speed, keeps the head clean (docs/queues.md, "Autovacuum").
- `create_full_index_stand_ins` (databases without partial indexes: MySQL, MariaDB): Django
  builds the lease and expiry indexes without their conditions there (models.W037), which
  serves as well, but leaves out the claim index (an index on an expression, models.W043) and
  the unique key's constraint (models.W036). The stand-ins: the unclaimed rows of a queue in
  handout order for the ORM dialect's claim (sql/orm.py), and one live job per (queue, unique
  key), which holds because these databases let any number of rows share a NULL key.
"""

from django.db import migrations, models

import django_alkqueue.fields

TABLE = "alkqueue_message"
AUTOVACUUM = {
    "autovacuum_vacuum_scale_factor": "0.0",
    "autovacuum_vacuum_threshold": "5000",
    "autovacuum_vacuum_insert_scale_factor": "0.0",
    "autovacuum_vacuum_insert_threshold": "5000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_cost_delay": "0",
}
STAND_INS = {"alkqueue_claim_full_idx": "(queue, claim_token, priority DESC, run_at, id)"}
UNIQUE_KEY_STAND_IN = "alkqueue_unique_key_full"


def tune_autovacuum(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    options = ", ".join(f"{k} = {v}" for k, v in AUTOVACUUM.items())
    schema_editor.execute(f"ALTER TABLE {TABLE} SET ({options})")


def untune_autovacuum(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER TABLE {TABLE} RESET ({', '.join(AUTOVACUUM)})")


def create_full_index_stand_ins(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    for name, columns in STAND_INS.items():
        schema_editor.execute(f"CREATE INDEX {name} ON {TABLE} {columns}")
    schema_editor.execute(
        f"CREATE UNIQUE INDEX {UNIQUE_KEY_STAND_IN} ON {TABLE} (queue, unique_key)"
    )


def drop_full_index_stand_ins(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    for name in [*STAND_INS, UNIQUE_KEY_STAND_IN]:
        schema_editor.execute(f"DROP INDEX {name} ON {TABLE}")


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="ClaimGate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100, unique=True)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "alkqueue_claimgate",
            },
        ),
        migrations.CreateModel(
            name="Consumer",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100, unique=True)),
                (
                    "handler",
                    models.CharField(help_text="dotted path of the handler", max_length=255),
                ),
                ("lease", models.FloatField()),
                ("max_attempts", models.IntegerField()),
                ("retry_policy", models.JSONField(default=dict)),
                ("paused", models.BooleanField(default=False)),
                ("code_limits", models.JSONField(blank=True, default=dict)),
                ("limit_overrides", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "db_table": "alkqueue_consumer",
                "permissions": [
                    ("pause_consumer", "Can pause and resume consumers"),
                    ("resume_consumer", "Can resume consumers"),
                    ("set_limits_consumer", "Can set and reset the limits of consumers"),
                ],
            },
        ),
        migrations.CreateModel(
            name="PeriodicTick",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                ("last_tick", models.DateTimeField(blank=True, null=True)),
                ("paused", models.BooleanField(default=False)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "periodic schedule",
                "db_table": "alkqueue_periodictick",
                "permissions": [("pause_periodictick", "Can pause and resume periodic schedules")],
            },
        ),
        migrations.CreateModel(
            name="Worker",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("worker_id", models.CharField(max_length=255, unique=True)),
                ("hostname", models.CharField(max_length=255)),
                ("pid", models.IntegerField()),
                ("queues", models.JSONField(default=list)),
                ("concurrency", models.IntegerField()),
                ("started_at", models.DateTimeField()),
                ("last_heartbeat_at", models.DateTimeField()),
                ("jobs_processed", models.BigIntegerField(default=0)),
                ("jobs_failed", models.BigIntegerField(default=0)),
                ("is_leader", models.BooleanField(default=False)),
            ],
            options={
                "db_table": "alkqueue_worker",
            },
        ),
        migrations.CreateModel(
            name="ClaimLedger",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100)),
                ("concurrency_key", models.CharField(max_length=255)),
                ("claimed_at", models.DateTimeField()),
                ("count", models.IntegerField()),
            ],
            options={
                "db_table": "alkqueue_claimledger",
                "indexes": [
                    models.Index(
                        fields=["queue", "concurrency_key", "claimed_at"],
                        name="alkqueue_claimledger_idx",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="DeadLetter",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                (
                    "job_id",
                    models.BigIntegerField(help_text="the id the job had while live", unique=True),
                ),
                ("queue", models.CharField(max_length=100)),
                ("payload", django_alkqueue.fields.PayloadField()),
                ("priority", models.SmallIntegerField(default=0)),
                ("attempts", models.IntegerField()),
                ("max_attempts", models.IntegerField()),
                ("backoff_base", models.FloatField()),
                ("lease", models.FloatField()),
                ("retention", models.FloatField(blank=True, null=True)),
                ("run_at", models.DateTimeField()),
                ("enqueued_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("unique_key", models.CharField(blank=True, max_length=255, null=True)),
                ("concurrency_key", models.CharField(blank=True, max_length=255, null=True)),
                ("claimed_by", models.CharField(blank=True, max_length=255, null=True)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("died_at", models.DateTimeField()),
                ("reason", models.CharField(max_length=100)),
                ("last_error", models.TextField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "dead letter",
                "db_table": "alkqueue_deadletter",
                "permissions": [("requeue_deadletter", "Can requeue dead letters")],
                "indexes": [
                    models.Index(fields=["queue", "died_at"], name="alkqueue_dead_queue_idx"),
                    models.Index(fields=["died_at"], name="alkqueue_dead_died_idx"),
                    models.Index(fields=["reason", "died_at"], name="alkqueue_dead_reason_idx"),
                ],
            },
        ),
        migrations.CreateModel(
            name="QueueMessage",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("queue", models.CharField(max_length=100)),
                ("payload", django_alkqueue.fields.PayloadField()),
                ("priority", models.SmallIntegerField(default=0)),
                ("attempts", models.IntegerField(default=0)),
                ("max_attempts", models.IntegerField()),
                ("backoff_base", models.FloatField(help_text="seconds")),
                ("lease", models.FloatField(help_text="seconds")),
                (
                    "retention",
                    models.FloatField(
                        blank=True, help_text="seconds a dead letter is kept", null=True
                    ),
                ),
                ("run_at", models.DateTimeField()),
                ("enqueued_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("unique_key", models.CharField(blank=True, max_length=255, null=True)),
                ("concurrency_key", models.CharField(blank=True, max_length=255, null=True)),
                ("claim_token", models.UUIDField(blank=True, null=True)),
                ("claimed_by", models.CharField(blank=True, max_length=255, null=True)),
                ("claimed_at", models.DateTimeField(blank=True, null=True)),
                ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                ("last_error", models.TextField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "job",
                "db_table": "alkqueue_message",
                "permissions": [
                    ("cancel_queuemessage", "Can cancel jobs"),
                    ("run_now_queuemessage", "Can run jobs now"),
                    ("change_priority_queuemessage", "Can change the priority of jobs"),
                    ("view_payload", "Can view payloads of sensitive queues"),
                ],
                "indexes": [
                    models.Index(
                        models.F("queue"),
                        models.OrderBy(models.F("priority"), descending=True),
                        models.F("run_at"),
                        models.F("id"),
                        condition=models.Q(("claim_token__isnull", True)),
                        name="alkqueue_pending_idx",
                    ),
                    models.Index(
                        condition=models.Q(("claim_token__isnull", False)),
                        fields=["queue", "lease_expires_at"],
                        name="alkqueue_lease_idx",
                    ),
                    models.Index(
                        condition=models.Q(("expires_at__isnull", False)),
                        fields=["expires_at"],
                        name="alkqueue_expiry_idx",
                    ),
                    models.Index(
                        condition=models.Q(("concurrency_key__isnull", False)),
                        fields=["queue", "concurrency_key"],
                        name="alkqueue_concurrency_key_idx",
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("unique_key__isnull", False)),
                        fields=("queue", "unique_key"),
                        name="alkqueue_live_unique_key",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="QueueStat",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100)),
                ("minute", models.DateTimeField()),
                ("pending", models.IntegerField(default=0)),
                ("scheduled", models.IntegerField(default=0)),
                ("claimed", models.IntegerField(default=0)),
                ("dead", models.IntegerField(default=0)),
                ("finished", models.IntegerField(default=0)),
                ("failed", models.IntegerField(default=0)),
                ("dead_lettered", models.IntegerField(default=0)),
                ("snoozed", models.IntegerField(default=0)),
            ],
            options={
                "verbose_name_plural": "queue overview",
                "db_table": "alkqueue_queuestat",
                "permissions": [
                    ("view_session_sql", "Can view other sessions' SQL in the health checks")
                ],
                "indexes": [models.Index(fields=["minute"], name="alkqueue_stat_minute_idx")],
                "constraints": [
                    models.UniqueConstraint(fields=("queue", "minute"), name="alkqueue_stat_minute")
                ],
            },
        ),
        migrations.CreateModel(
            name="TaskResult",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("job_id", models.BigIntegerField(unique=True)),
                ("backend", models.CharField(max_length=100)),
                ("task_path", models.CharField(max_length=255)),
                ("queue", models.CharField(max_length=100)),
                ("priority", models.IntegerField(blank=True, null=True)),
                ("run_after", models.DateTimeField(blank=True, null=True)),
                ("status", models.CharField(max_length=20)),
                ("args", models.JSONField(default=list)),
                ("kwargs", models.JSONField(default=dict)),
                ("return_value", models.JSONField(blank=True, null=True)),
                ("errors", models.JSONField(default=list)),
                ("worker_ids", models.JSONField(default=list)),
                ("enqueued_at", models.DateTimeField()),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("last_attempted_at", models.DateTimeField(blank=True, null=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "db_table": "alkqueue_taskresult",
                "indexes": [
                    models.Index(
                        condition=models.Q(("expires_at__isnull", False)),
                        fields=["expires_at"],
                        name="alkqueue_result_expiry_idx",
                    )
                ],
            },
        ),
        migrations.RunPython(tune_autovacuum, untune_autovacuum, elidable=False),
        # DDL on MySQL commits by itself, so it cannot run inside the migration's transaction.
        migrations.RunPython(
            create_full_index_stand_ins, drop_full_index_stand_ins, elidable=False, atomic=False
        ),
    ]
