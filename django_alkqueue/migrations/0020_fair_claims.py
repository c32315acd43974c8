"""The fair claims per key and 5-minute bucket (docs/fair-share.md, "Share of claims"): what
the admin's share of the last hour's claims adds up. A plain table on every database: its
unique constraint is what each fair claim's upsert names, its bucket index what the leader's
sweep of old buckets walks."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_alkqueue", "0019_no_duplicate_stand_ins"),
    ]

    operations = [
        migrations.CreateModel(
            name="FairClaims",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100)),
                ("fair_key", models.CharField(max_length=255)),
                ("bucket", models.DateTimeField()),
                ("claims", models.IntegerField()),
            ],
            options={
                "db_table": "alkqueue_fairclaims",
                "indexes": [models.Index(fields=["bucket"], name="alkqueue_fair_bucket_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("queue", "fair_key", "bucket"), name="alkqueue_fair_claims_key"
                    )
                ],
            },
        ),
    ]
