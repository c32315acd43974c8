from django.db import migrations, models

import django_alkqueue.fields


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0013_debounce_and_unique_windows"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobStep",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job_id", models.BigIntegerField(verbose_name="job id")),
                ("name", models.CharField(max_length=200, verbose_name="name")),
                ("value", django_alkqueue.fields.PayloadField(verbose_name="value")),
                ("recorded_at", models.DateTimeField(verbose_name="recorded at")),
                ("attempt", models.IntegerField(verbose_name="attempt")),
                ("duration", models.FloatField(verbose_name="duration")),
            ],
            options={
                "verbose_name": "job step",
                "verbose_name_plural": "job steps",
                "db_table": "alkqueue_jobstep",
                "constraints": [
                    models.UniqueConstraint(fields=("job_id", "name"), name="alkqueue_jobstep_name")
                ],
            },
        ),
    ]
