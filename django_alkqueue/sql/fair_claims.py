"""The fair claims per key and bucket (FairClaims, docs/fair-share.md "Share of claims"): what
each fair claim adds, in its transaction, and the leader's sweep of the old buckets.

A claim adds its jobs per key to the bucket its time falls in with one statement, an upsert
that increments: the unique constraint alkqueue_fair_claims_key on (queue, fair_key, bucket)
keeps one row per key and bucket, and is what the conflict names. Two spellings of the same
statement: INSERT ... ON CONFLICT where the database has it (PostgreSQL, SQLite >= 3.24), and
INSERT ... ON DUPLICATE KEY UPDATE on MariaDB and MySQL, whose only other unique key, the id,
is never given. Both run under the queue's ClaimGate lock, so they never race each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import FAIR_CLAIMS_TABLE, FairClaims, fair_claims_bucket

_COLUMNS = "(queue, fair_key, bucket, claims)"

#: PostgreSQL and SQLite (constraint alkqueue_fair_claims_key).
ADD_ON_CONFLICT = f"""
INSERT INTO {FAIR_CLAIMS_TABLE} {_COLUMNS} VALUES {{values}}
ON CONFLICT (queue, fair_key, bucket) DO UPDATE SET
    claims = {FAIR_CLAIMS_TABLE}.claims + excluded.claims
"""
#: MariaDB and MySQL (constraint alkqueue_fair_claims_key).
ADD_ON_DUPLICATE_KEY = f"""
INSERT INTO {FAIR_CLAIMS_TABLE} {_COLUMNS} VALUES {{values}}
ON DUPLICATE KEY UPDATE claims = claims + VALUES(claims)
"""


def add(
    connection: BaseDatabaseWrapper,
    statement: str,
    queue: str,
    at: datetime,
    counts: Mapping[str, int],
) -> None:
    """Add each key's `counts` to its row of the bucket `at` falls in: one `statement` (either
    of the above) for every key of the claim; a key's first claim of the bucket inserts."""
    bucket = connection.ops.adapt_datetimefield_value(fair_claims_bucket(at))
    params = [p for key, n in counts.items() for p in (queue, key, bucket, n)]
    values = ", ".join(["(%s, %s, %s, %s)"] * len(counts))
    with connection.cursor() as cursor:
        cursor.execute(statement.format(values=values), params)


def sweep(connection: BaseDatabaseWrapper, before: datetime, batch: int) -> int:
    """Delete up to `batch` buckets that started before `before` (index
    alkqueue_fair_bucket_idx); returns how many went."""
    rows = FairClaims.objects.using(connection.alias)
    ids = list(rows.older_than(before).values_list("id", flat=True)[:batch])
    return int(rows.filter(id__in=ids).delete()[0]) if ids else 0
