"""Which single-job enqueues send the wake-up NOTIFY (PostgreSQL).

A NOTIFY is not free. At commit PostgreSQL takes a lock on the database for its notification
queue and keeps it until the commit's WAL is flushed, so notifying transactions commit one at
a time, and the commit then signals every backend that listens. Measured by hand on the
2-core machine of docs/benchmarks.md (psycopg, prepared, autocommit): the notifying INSERT
took 12 to 16 us more than the same INSERT without pg_notify with nobody listening, and about
44 us more with one session listening, out of 300 to 370 us per call; `make bench` measures
four processes enqueuing at once ("Single enqueues from four processes at once").

A burst needs only its first wake-up: a woken worker claims what is due and keeps claiming
while its claims come back full. So an enqueue outside a transaction sends no NOTIFY when its
connection sent one for the same queue less than ALKQUEUE["NOTIFY_WINDOW"] seconds before,
counted from that enqueue's commit. Each worker that gets a NOTIFY looks again
NOTIFY_WINDOW + FOLLOW_UP_SLACK later (worker/claimer.py), which finds the jobs the sender
left unannounced; polling stays the safety net behind both.

Always notified: an enqueue inside a transaction (its NOTIFY goes out at the caller's commit,
whenever that is, so no window can start from it), an enqueue with a unique key (its own
statement), and `enqueue_many` (one NOTIFY per batch already).

The time of the last NOTIFY is kept on Django's connection object: one per thread and alias,
like the connection itself, and nothing is shared between threads or processes.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

#: Beyond the window, how long a worker waits after a NOTIFY before its follow-up look: the
#: unannounced enqueue's own statement and commit, which may start at the end of the window.
FOLLOW_UP_SLACK = 0.05

#: Where a Django connection keeps, per queue, the monotonic time its last NOTIFY committed.
_LAST_SENT = "_alkqueue_notified_at"


def wake_due(
    connection: BaseDatabaseWrapper, queue: str, window: float, now: float, autocommit: bool
) -> bool:
    """Whether an enqueue of one job on `connection` at monotonic time `now` sends a NOTIFY;
    `autocommit`: the enqueue's statement is its own transaction."""
    if window <= 0 or not autocommit:
        return True
    sent = getattr(connection, _LAST_SENT, {}).get(queue)
    return sent is None or now - sent >= window


def wake_sent(connection: BaseDatabaseWrapper, queue: str, now: float) -> None:
    """A NOTIFY for `queue` committed on `connection` at `now`: the window starts there.
    Called only in autocommit, where the enqueue's statement was its own transaction."""
    sent: dict[str, float] | None = getattr(connection, _LAST_SENT, None)
    if sent is None:
        sent = {}
        setattr(connection, _LAST_SENT, sent)
    sent[queue] = now


def follow_up_delay(window: float) -> float | None:
    """How long after a NOTIFY a worker looks again; None when every enqueue notifies."""
    return window + FOLLOW_UP_SLACK if window > 0 else None
