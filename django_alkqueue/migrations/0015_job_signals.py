from django.db import migrations, models

import django_alkqueue.fields


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0014_job_steps"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobSignal",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job_id", models.BigIntegerField(verbose_name="job id")),
                ("name", models.CharField(max_length=200, verbose_name="name")),
                ("payload", django_alkqueue.fields.PayloadField(verbose_name="payload")),
                ("sent_at", models.DateTimeField(verbose_name="sent at")),
            ],
            options={
                "verbose_name": "job signal",
                "verbose_name_plural": "job signals",
                "db_table": "alkqueue_jobsignal",
            },
        ),
        migrations.AddField(
            model_name="waitingjob",
            name="signal",
            field=models.CharField(blank=True, max_length=200, null=True, verbose_name="signal"),
        ),
        migrations.AddIndex(
            model_name="waitingjob",
            index=models.Index(fields=["signal", "run_at"], name="alkqueue_wait_deadline_idx"),
        ),
        migrations.AddConstraint(
            model_name="jobsignal",
            constraint=models.UniqueConstraint(
                fields=("job_id", "name"), name="alkqueue_jobsignal_name"
            ),
        ),
    ]
