"""MariaDB and MySQL specifics: the enqueue's statements, InnoDB's figure for what PostgreSQL
calls dead tuples, and its deadlocks.

The enqueue is written by hand rather than through the ORM, whose compiler spends more CPU on
each row than the server does: only the columns an enqueue sets (INSERT_FIELDS; the others
take their defaults), the payload as the text already encoded.

The history list length counts undo log records that purge has not yet removed. A
transaction left open keeps every older record alive, so the list grows while the queue's
churn goes on, and scans of the queue table (claims among them) walk ever longer version
chains. Reading INNODB_METRICS needs the PROCESS privilege.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, OperationalError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..jobs import Stamps
from ..models import MESSAGE_TABLE
from .base import INSERT_FIELDS, KEYLESS_INSERT_FIELDS, insert_values
from .orm_rows import insert_groups

_ROW = "(" + ", ".join(["%s"] * len(INSERT_FIELDS)) + ")"
_KEYLESS_ROW = "(" + ", ".join(["%s"] * len(KEYLESS_INSERT_FIELDS)) + ")"

# Many jobs, MariaDB 10.5+: one multi-row INSERT per insert group (at most orm_rows.CHUNK rows
# and INSERT_CHARACTERS of payload, under max_allowed_packet).
INSERT_MANY = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(INSERT_FIELDS)})
VALUES {{values}}
RETURNING id
"""

# One job without a unique key (MariaDB and MySQL); its id is the cursor's lastrowid.
INSERT_ONE = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(KEYLESS_INSERT_FIELDS)})
VALUES {_KEYLESS_ROW}
"""


def insert_many(
    connection: BaseDatabaseWrapper, queue: str, texts: Sequence[str], stamps: Stamps
) -> list[int]:
    """Insert one row per payload text with INSERT_MANY; returns their ids in `texts` order."""
    ids: list[int] = []
    # Every column after queue and payload, the same in each row: adapted once.
    stamped = _params(connection, insert_values(queue, "", stamps))[2:]
    with connection.cursor() as cursor:
        for group in insert_groups(texts):
            chunk = texts[group]
            params = [value for text in chunk for value in (queue, text, *stamped)]
            cursor.execute(INSERT_MANY.format(values=", ".join([_ROW] * len(chunk))), params)
            # AUTO_INCREMENT numbers one statement's rows upwards in VALUES order (in every
            # innodb_autoinc_lock_mode), whatever order RETURNING lists them in.
            ids.extend(sorted(int(found[0]) for found in cursor.fetchall()))
    return ids


def insert_one(connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps) -> int:
    """Insert one job without a unique key with INSERT_ONE; returns its id."""
    values = insert_values(queue, text, stamps)[: len(KEYLESS_INSERT_FIELDS)]
    with connection.cursor() as cursor:
        cursor.execute(INSERT_ONE, _params(connection, values))
        return int(connection.ops.last_insert_id(cursor, MESSAGE_TABLE, "id"))


def _params(connection: BaseDatabaseWrapper, values: Sequence[Any]) -> list[Any]:
    """`values` as the backend binds them: datetimes as the ORM writes them (UTC, naive)."""
    adapt = connection.ops.adapt_datetimefield_value
    return [adapt(value) if isinstance(value, datetime) else value for value in values]


HISTORY_LENGTH_SQL = (
    "SELECT `count` FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'"
)


def history_length(connection: BaseDatabaseWrapper) -> int | None:
    """The history list length; None when the user may not read it (no PROCESS privilege)."""
    try:
        # A savepoint: a refused read must not spoil a caller's transaction.
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(HISTORY_LENGTH_SQL)
            row = cursor.fetchone()
    except DatabaseError:
        return None
    return None if row is None else int(row[0])


#: ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back to break a lock cycle.
DEADLOCK = 1213


def is_deadlock(error: Exception) -> bool:
    """Whether `error` is InnoDB's deadlock, which two inserts of one unique key can meet
    while an earlier row of that key is deleted but not yet purged."""
    return isinstance(error, OperationalError) and bool(error.args) and error.args[0] == DEADLOCK
