"""Fair share between tenants (docs/fair-share.md).

- `fair_key` on the live table, with an index of the unclaimed keyed rows per queue. MySQL and
  MariaDB have no partial index (models.W036); a full index on (queue, fair_key) stands in.
- `Consumer.fair_weights`: the operator's weights; `ClaimGate.fair_clock` and `FairTurn`:
  where each key stands in the queue's turns.
"""

from django.db import migrations, models

TABLE = "alkqueue_message"
FAIR_KEY_STAND_IN = "alkqueue_fair_key_full"


def create_stand_in(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    schema_editor.execute(f"CREATE INDEX {FAIR_KEY_STAND_IN} ON {TABLE} (queue, fair_key)")


def drop_stand_in(apps, schema_editor):
    if schema_editor.connection.features.supports_partial_indexes:
        return
    schema_editor.execute(f"DROP INDEX {FAIR_KEY_STAND_IN} ON {TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0015_job_signals"),
    ]

    operations = [
        migrations.CreateModel(
            name="FairTurn",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100)),
                ("fair_key", models.CharField(max_length=255)),
                ("turn", models.FloatField()),
            ],
            options={
                "db_table": "alkqueue_fairturn",
            },
        ),
        migrations.AddField(
            model_name="claimgate",
            name="fair_clock",
            field=models.FloatField(db_default=0.0, default=0.0),
        ),
        migrations.AddField(
            model_name="consumer",
            name="fair_weights",
            field=models.JSONField(
                blank=True, db_default={}, default=dict, verbose_name="fair weights"
            ),
        ),
        migrations.AddField(
            model_name="queuemessage",
            name="fair_key",
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name="fair key"),
        ),
        migrations.AddIndex(
            model_name="queuemessage",
            index=models.Index(
                condition=models.Q(("claim_token__isnull", True), ("fair_key__isnull", False)),
                fields=["queue", "fair_key"],
                name="alkqueue_fair_key_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="fairturn",
            constraint=models.UniqueConstraint(
                fields=("queue", "fair_key"), name="alkqueue_fair_turn_key"
            ),
        ),
        migrations.RunPython(create_stand_in, drop_stand_in, elidable=False, atomic=False),
    ]
