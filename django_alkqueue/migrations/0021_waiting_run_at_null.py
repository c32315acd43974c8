"""A waiting job is a state of its own: its live row's run_at is NULL until it is released,
not a far-future time. Before, a waiting job's row was parked at 9000-01-01, and so was the
WaitingJob row of a wait for a signal with no deadline; both are NULL now (docs/workflows.md).

Both columns become nullable (PostgreSQL drops the NOT NULL in place; MariaDB and SQLite
rewrite the table), then `unpark_rows` turns the parked values NULL. The reverse writes the
parked time back before the columns are NOT NULL again."""

from datetime import UTC, datetime

from django.conf import settings
from django.db import migrations, models

#: The year waiting rows were parked at before this migration.
PARKED_YEAR = 9000


def parked_at():
    at = datetime(PARKED_YEAR, 1, 1)
    return at.replace(tzinfo=UTC) if settings.USE_TZ else at


def unpark_rows(apps, schema_editor):
    using = schema_editor.connection.alias
    for name in ("QueueMessage", "WaitingJob"):
        rows = apps.get_model("django_alkqueue", name).objects.using(using)
        rows.filter(run_at__gte=parked_at()).update(run_at=None)


def park_rows(apps, schema_editor):
    using = schema_editor.connection.alias
    for name in ("QueueMessage", "WaitingJob"):
        rows = apps.get_model("django_alkqueue", name).objects.using(using)
        rows.filter(run_at__isnull=True).update(run_at=parked_at())


class Migration(migrations.Migration):
    dependencies = [("django_alkqueue", "0020_fair_claims")]

    operations = [
        migrations.AlterField(
            model_name="queuemessage",
            name="run_at",
            field=models.DateTimeField(null=True, verbose_name="run at"),
        ),
        migrations.AlterField(
            model_name="waitingjob",
            name="run_at",
            field=models.DateTimeField(null=True, verbose_name="run at"),
        ),
        migrations.RunPython(unpark_rows, park_rows),
    ]
