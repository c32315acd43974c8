"""The PostgreSQL driver: everything that knows psycopg lives in this package.

- statements.py: the SQL, with the indexes each statement relies on;
- dialect.py: `PostgresDialect`, the Dialect interface over those statements;
- session.py: how the hot statements run (a kept psycopg cursor, prepared, pipelined);
- copy_rows.py: the rows of a bulk enqueue in COPY's binary or text format;
- wake_pacing.py: which single enqueues send the wake-up NOTIFY;
- listen.py: the worker's LISTEN session.

Importing this package imports no psycopg; its modules do (sql/__init__.py loads the
dialect only for a PostgreSQL connection).
"""

import hashlib

#: Channel of the wake-up NOTIFY sent by enqueues (wake_pacing.py says which); the payload is
#: the queue name. Documented in docs/reference.md, "Other names".
NOTIFY_CHANNEL = "alkqueue"


def cancel_channel(worker_id: str) -> str:
    """The channel on which `worker_id` hears that a job it runs was cancelled; the payload
    is the job id. Hashed: a worker id may be longer than a channel name (63 bytes) and hold
    any character. Documented in docs/reference.md, "Other names"."""
    return "alkqueue_cancel_" + hashlib.sha256(worker_id.encode()).hexdigest()[:24]
