"""InnoDB's figure for what PostgreSQL calls dead tuples, and its deadlocks (MySQL, MariaDB).

The history list length counts undo log records that purge has not yet removed. A
transaction left open keeps every older record alive, so the list grows while the queue's
churn goes on, and scans of the queue table (claims among them) walk ever longer version
chains. Reading INNODB_METRICS needs the PROCESS privilege.
"""

from __future__ import annotations

from django.db import DatabaseError, OperationalError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

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
