"""The kept history (docs/running-jobs.md, "Kept history and recorded output").

Django creates the table from the model on every database. On PostgreSQL a RunSQL then
replaces it with the same columns and index names, partitioned by range of `finished_at` (a
day per partition, created ahead by the leader: sql/postgresql/history.py), with a DEFAULT
partition so that an ack never fails for want of a partition. The model stays managed: the
columns Django sees are the table's, and a later migration that adds a column or an index
applies to the partitioned table as to any (PostgreSQL passes both on to the partitions).
The primary key of a partitioned table must include the partition key, so it is
(job_id, finished_at) there; Django's primary key, job_id, is the leading column of it.

The model's indexes are not in the SQL: Django creates them at the end of the migration
(its deferred statements), on the partitioned table by then, which builds them on every
partition, present and future, under the same names.
"""

from django.db import migrations, models

import django_alkqueue.fields

TABLE = "alkqueue_finishedjob"
PARTITIONED = f"""
DROP TABLE {TABLE};
CREATE TABLE {TABLE} (
    job_id bigint NOT NULL,
    queue varchar(100) NOT NULL,
    payload text NOT NULL,
    priority smallint NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    backoff_base double precision NOT NULL,
    lease double precision NOT NULL,
    unique_key varchar(255) NULL,
    concurrency_key varchar(255) NULL,
    last_error text NULL,
    enqueued_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone NULL,
    finished_at timestamp with time zone NOT NULL,
    duration double precision NULL,
    worker_id varchar(255) NULL,
    outcome varchar(20) NOT NULL,
    output text NULL,
    output_error text NULL,
    delete_after timestamp with time zone NOT NULL,
    CONSTRAINT {TABLE}_pkey PRIMARY KEY (job_id, finished_at)
) PARTITION BY RANGE (finished_at);
CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT;
"""
# Back to a plain table, for DeleteModel to drop.
UNPARTITIONED = f"DROP TABLE {TABLE}; CREATE TABLE {TABLE} (job_id bigint PRIMARY KEY);"


class RunSQLOnPostgreSQL(migrations.RunSQL):
    """RunSQL that runs on PostgreSQL only: the other databases keep Django's table."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0002_translated_names"),
    ]

    operations = [
        migrations.CreateModel(
            name="FinishedJob",
            fields=[
                (
                    "job_id",
                    models.BigIntegerField(
                        primary_key=True, serialize=False, verbose_name="job id"
                    ),
                ),
                ("queue", models.CharField(max_length=100)),
                ("payload", django_alkqueue.fields.PayloadField()),
                ("priority", models.SmallIntegerField(default=0)),
                ("attempts", models.IntegerField()),
                ("max_attempts", models.IntegerField()),
                ("backoff_base", models.FloatField()),
                ("lease", models.FloatField()),
                ("unique_key", models.CharField(blank=True, max_length=255, null=True)),
                ("concurrency_key", models.CharField(blank=True, max_length=255, null=True)),
                ("last_error", models.TextField(blank=True, null=True)),
                ("enqueued_at", models.DateTimeField()),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField()),
                ("duration", models.FloatField(blank=True, null=True)),
                ("worker_id", models.CharField(blank=True, max_length=255, null=True)),
                ("outcome", models.CharField(max_length=20)),
                ("output", django_alkqueue.fields.PayloadField(blank=True, null=True)),
                ("output_error", models.TextField(blank=True, null=True)),
                ("delete_after", models.DateTimeField()),
            ],
            options={
                "verbose_name": "finished job",
                "db_table": "alkqueue_finishedjob",
                "indexes": [
                    models.Index(fields=["finished_at"], name="alkqueue_finished_at_idx"),
                    models.Index(
                        fields=["queue", "finished_at"], name="alkqueue_finished_queue_idx"
                    ),
                    models.Index(fields=["delete_after"], name="alkqueue_finished_expiry_idx"),
                    models.Index(
                        condition=models.Q(("outcome", "succeeded"), _negated=True),
                        fields=["finished_at"],
                        name="alkqueue_finished_other_idx",
                    ),
                    models.Index(
                        condition=models.Q(("concurrency_key__isnull", False)),
                        fields=["concurrency_key"],
                        name="alkqueue_finished_key_idx",
                    ),
                ],
            },
        ),
        RunSQLOnPostgreSQL(PARTITIONED, UNPARTITIONED),
    ]
