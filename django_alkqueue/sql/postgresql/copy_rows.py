"""The rows of a PostgreSQL bulk enqueue, for psycopg's `Copy.write_row` (dialect.py sends
them).

Only the id and the payload differ from row to row; the fields every row shares are made
once per call. The format is binary (`Copy.set_types` names each column's type): the server
then parses no numbers and no timestamps, and the server's work was the slower side of a
bulk enqueue. Naive datetimes (USE_TZ = False) mean local time in the session's time zone,
which the server resolves itself; those calls use the text format and leave it to the
server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from ...jobs import Stamps
from ..base import INSERT_FIELDS, insert_values

#: Each column's type (models.QueueMessage) in COPY's order: the id, then INSERT_FIELDS:
#: queue, payload, priority, attempts, max_attempts, backoff_base, lease, retention, run_at,
#: enqueued_at, expires_at, trace_context, unique_key.
TYPES = ("int8", "text", "text", "int2", "int4", "int4", "float8", "float8", "float8",
         "timestamptz", "timestamptz", "timestamptz", "text", "text")  # fmt: skip
assert len(TYPES) == len(INSERT_FIELDS) + 1


class CopyRows:
    """One call's rows: `options` for the COPY statement, `rows()` per chunk."""

    def __init__(self, queue: str, stamps: Stamps) -> None:
        values = insert_values(queue, "", stamps)
        binary = all(value.tzinfo is not None for value in values if isinstance(value, datetime))
        self.options = " (FORMAT BINARY)" if binary else ""
        self._queue, self._same = queue, values[2:]

    def rows(self, ids: Sequence[int], texts: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        queue, same = self._queue, self._same
        for job_id, text in zip(ids, texts, strict=True):
            yield (job_id, queue, text, *same)
