# A requeued job keeps its first enqueued_at; requeued_at says when a requeue brought it back
# (issue 37). The dead letter keeps it too, so a second requeue counts the job's lifetime
# from the first. Nullable columns, no default: no table rewrite.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0006_running_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="requeued_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="requeued at"),
        ),
        migrations.AddField(
            model_name="queuemessage",
            name="requeued_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="requeued at"),
        ),
    ]
