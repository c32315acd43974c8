"""DeadLetter.error_fingerprint: the error group of each dead letter (error_groups.py), with
its indexes, and the fingerprints of the dead letters already stored. And QueueStat's wait
histogram (timings.py), which the queue page charts; its run-time chart reads the handler
duration histogram of 0004_traces_and_stat_columns, as /metrics/ does."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from django_alkqueue.error_groups import fingerprint

#: Dead letters read and written per step of the backfill.
BACKFILL_BATCH = 1_000


def backfill(apps: Any, schema_editor: Any) -> None:
    """Fingerprint every stored dead letter, in id order, BACKFILL_BATCH at a time: one
    UPDATE per fingerprint of a batch (the letters of a batch share few)."""
    dead = apps.get_model("django_alkqueue", "DeadLetter").objects.using(
        schema_editor.connection.alias
    )
    last = 0
    while True:
        rows = list(
            dead.filter(pk__gt=last).order_by("pk").values_list("pk", "last_error")[:BACKFILL_BATCH]
        )
        if not rows:
            return
        by_print: dict[str, list[int]] = {}
        for pk, text in rows:
            by_print.setdefault(fingerprint(text), []).append(pk)
        for value, ids in by_print.items():
            dead.filter(pk__in=ids).update(error_fingerprint=value)
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("django_alkqueue", "0004_traces_and_stat_columns")]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="error_fingerprint",
            field=models.CharField(
                blank=True, max_length=32, null=True, verbose_name="error fingerprint"
            ),
        ),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(
                fields=["queue", "error_fingerprint", "died_at"], name="alkqueue_dead_error_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(
                fields=["error_fingerprint", "died_at"], name="alkqueue_dead_fingerprint_idx"
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        # The wait and run histograms of the queue page's charts (timings.py).
        migrations.AddField(
            model_name="queuestat", name="wait_10ms", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_30ms", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_100ms", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_300ms", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_1s", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_3s", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_10s", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_30s", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_1m", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_5m", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_15m", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_1h", field=models.IntegerField(default=0)
        ),
        migrations.AddField(
            model_name="queuestat", name="wait_over", field=models.IntegerField(default=0)
        ),
    ]
