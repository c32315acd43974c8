"""The ORM dialect's rows and filters (sql/orm.py, sql/limited_claim.py): the row shape
Dialect.to_job reads, the predicates operations.py names as Q objects, and the dead letter a
live row becomes (written by OrmDialect.dead_letter)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Expression, F, Q, QuerySet, TextField, Value
from django.db.models.expressions import ExpressionWrapper

from ..error_groups import fingerprint
from ..models import DeadLetter, QueueMessage
from .base import ROW_FIELDS, Row, TakenDeadLetter

#: Ids per IN list: well below every backend's limit on parameters in one statement.
CHUNK = 500
#: Payload characters per multi-row INSERT: MySQL and MariaDB refuse a statement above their
#: max_allowed_packet (16 MiB by default on MariaDB) and drop the connection. 2 Mi characters
#: are at most 8 MiB of UTF-8, under that even when escaping doubles the ASCII ones.
INSERT_CHARACTERS = 2 * 1024 * 1024
#: Handout order, as in the other dialects (see OrmDialect.due for the index).
HANDOUT = ("-priority", "run_at", "id")

# The payload column read as the stored JSON text: the field itself would decode it, and the
# row shape carries the text (Dialect.to_job decodes it once).
_PAYLOAD_TEXT = ExpressionWrapper(F("payload"), output_field=TextField())
_LIVE_FIELDS: tuple[str | Expression, ...] = tuple(
    _PAYLOAD_TEXT if name == "payload" else name for name in (*ROW_FIELDS[:18], *ROW_FIELDS[20:])
)
_DEAD_FIELDS: tuple[str | Expression, ...] = tuple(
    "job_id" if name == "id" else _PAYLOAD_TEXT if name == "payload" else name
    for name in (*ROW_FIELDS[:13], *ROW_FIELDS[14:16], *ROW_FIELDS[17:])
)
_NO_EXPIRY = Q(expires_at__isnull=True)


def not_expired(now: datetime) -> Q:
    return _NO_EXPIRY | Q(expires_at__gt=now)


def by_claim(job_id: int, token: Any, now: datetime) -> Q:
    """The row of a claim that is still valid: same token, lease live."""
    return Q(id=job_id, claim_token=token, lease_expires_at__gt=now)


def expired(now: datetime, queue: str | None = None) -> Q:
    """Live rows past their expires_at, of `queue` or of every queue."""
    scope = Q() if queue is None else Q(queue=queue)
    return scope & Q(expires_at__lte=now)


def lapsed_exhausted(now: datetime) -> Q:
    """Claims whose lease lapsed with no attempt left: the reclaim dead-letters them."""
    return Q(claim_token__isnull=False, lease_expires_at__lte=now) & Q(
        attempts__gte=F("max_attempts")
    )


def handout_key(row: Row) -> tuple[Any, ...]:
    """A row's place in handout order (HANDOUT) from its fields: priority, run_at, id."""
    return (-row[3], row[9], row[0])


def as_claimed(row: Row, token: Any, worker_id: str, now: datetime) -> Row:
    """A locked row as the claim's UPDATE leaves it (OrmDialect._stamp), without reading it
    again: one attempt more, the claim token, the worker and the lease from `now`."""
    lease_expires_at = now + timedelta(seconds=row[7])
    return (*row[:4], row[4] + 1, *row[5:13], token, worker_id, now, lease_expires_at, *row[17:])


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def insert_groups(texts: Sequence[str]) -> Iterator[slice]:
    """The slices of `texts` that one multi-row INSERT each may carry: at most CHUNK rows and
    INSERT_CHARACTERS of payload, and always at least one row."""
    start, size = 0, 0
    for end, text in enumerate(texts):
        if end > start and (end - start == CHUNK or size + len(text) > INSERT_CHARACTERS):
            yield slice(start, end)
            start, size = end, 0
        size += len(text)
    if start < len(texts):
        yield slice(start, len(texts))


def live_rows(queryset: QuerySet[QueueMessage], limit: int | None = None) -> list[Row]:
    """Live rows in the row shape (ROW_FIELDS), the first `limit` of them when given: a live
    row has no death."""
    values = queryset.values_list(*_LIVE_FIELDS)
    if limit is not None:
        values = values[:limit]
    return [_live_shape(row) for row in values]


def dying_rows(queryset: QuerySet[QueueMessage]) -> list[tuple[Row, str | None]]:
    """Live rows about to die, each in the row shape with its fair key (its dead letter keeps
    the key, which the row shape does not carry)."""
    values = queryset.values_list(*_LIVE_FIELDS, "fair_key")
    return [(_live_shape(row[:-1]), row[-1]) for row in values]


def _live_shape(row: Row) -> Row:
    return (*row[:18], None, None, *row[18:])


def dead_rows(queryset: QuerySet[DeadLetter]) -> list[Row]:
    """Dead letters in the row shape: no claim token, no lease."""
    return [_dead_shape(row) for row in queryset.values_list(*_DEAD_FIELDS)]


def taken_dead_letters(queryset: QuerySet[DeadLetter]) -> list[TakenDeadLetter]:
    """Dead letters in the row shape, each with the fair key its requeue writes back."""
    values = queryset.values_list(*_DEAD_FIELDS, "fair_key")
    return [TakenDeadLetter(_dead_shape(row[:-1]), row[-1]) for row in values]


def _dead_shape(row: Row) -> Row:
    return (*row[:13], None, row[13], row[14], None, *row[15:])


def as_dead_letter(
    row: Row, fair_key: str | None, now: datetime, reason: str, error: str
) -> DeadLetter:
    """The dead letter of a live row (ROW_FIELDS order) and its fair key, stored text
    payload and all."""
    fields = dict(zip(ROW_FIELDS, row, strict=True))
    return DeadLetter(
        job_id=fields["id"], queue=fields["queue"],
        payload=Value(fields["payload"], output_field=TextField()),
        priority=fields["priority"], attempts=fields["attempts"],
        max_attempts=fields["max_attempts"], backoff_base=fields["backoff_base"],
        lease=fields["lease"], retention=fields["retention"],
        run_at=now if fields["run_at"] is None else fields["run_at"],  # it died waiting
        enqueued_at=fields["enqueued_at"], expires_at=fields["expires_at"],
        unique_key=fields["unique_key"], claimed_by=fields["claimed_by"],
        claimed_at=fields["claimed_at"], died_at=now, reason=reason, last_error=error,
        error_fingerprint=fingerprint(error), concurrency_key=fields["concurrency_key"],
        trace_context=fields["trace_context"], requeued_at=fields["requeued_at"],
        fair_key=fair_key,
    )  # fmt: skip


def as_dead_row(row: Row, now: datetime, reason: str, error: str) -> Row:
    """A live row as the dead letter it became: no token, no lease; its error, death, reason;
    the time it died as its run_at when it died waiting (as_dead_letter)."""
    run_at = now if row[9] is None else row[9]
    return (*row[:9], run_at, *row[10:13], None, row[14], row[15], None, error, now, reason,
            *row[20:])  # fmt: skip
