"""A dead letter keeps its job's fair key, so a requeued job takes its turns again
(docs/fair-share.md). A nullable column without a default: a plain ADD COLUMN on every
database, which rewrites no existing dead letter on PostgreSQL and MariaDB. No index: nothing
reads dead letters by fair key."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0017_signal_permission"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="fair_key",
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name="fair key"),
        ),
    ]
