"""The leader's VACUUM of the live table, when autovacuum falls behind (PostgreSQL).

Every job leaves dead row versions behind (the claim's old version, the acked row), and
their index entries stay at the head of the claim index until a VACUUM removes them: each
claim then reads past them, and claims slow down several-fold (docs/benchmarks.md). The
migrations tune autovacuum for the table, but autovacuum may be off, busy with other
tables or asleep for its naptime while a busy queue makes tens of thousands of dead rows a
second. So the leader checks the server's count of dead row versions and runs VACUUM once it
passes ALKQUEUE["VACUUM_DEAD_TUPLES"]. A VACUUM cannot remove rows that an open transaction
may still see; the admin's health section names the session holding it back. While the
oldest such transaction is the one the last VACUUM had to keep rows for, no row has become
removable since, and the leader does not VACUUM again (it would read the table and its
indexes every RECLAIM_INTERVAL for nothing, for as long as a report holds its snapshot).

A VACUUM of the table while it is empty, when it cannot truncate the table's pages, leaves
planner statistics of no rows on many pages, under which the planner takes the table for one
row whatever it holds; the leader then ANALYZEs it as soon as the server counts live rows.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import DatabaseError, connections

from ..conf import get_settings
from ..models import MESSAGE_TABLE
from ..sql import dialect_for

logger = logging.getLogger("django_alkqueue")


class VacuumService:
    name = "vacuum"

    def __init__(self, using: str) -> None:
        self.using = using
        #: The oldest open transaction when this leader last vacuumed (Dialect.vacuum_horizon).
        self._vacuumed_behind: str | None = None

    @property
    def interval(self) -> float:
        return get_settings().RECLAIM_INTERVAL

    def run_once(self, now: datetime) -> bool:
        """VACUUM the live table if its dead row versions passed the threshold; returns
        whether it did."""
        threshold = get_settings().VACUUM_DEAD_TUPLES
        if threshold is None:
            return False
        connection = connections[self.using]
        dialect = dialect_for(connection)
        if dialect.statistics_say_empty(connection):
            # A VACUUM of the table while it was empty left statistics under which every
            # plan takes it for one row; the ack's would walk the whole table per ack.
            dialect.analyze(connection)
            logger.info("analyzed %s: its statistics said empty while it held rows",
                        MESSAGE_TABLE)  # fmt: skip
        dead = dialect.dead_tuples(connection)
        if dead is None or dead < threshold:
            return False
        horizon = dialect.vacuum_horizon(connection)
        if horizon is not None and horizon == self._vacuumed_behind:
            logger.debug("vacuum of %s skipped: the transaction (xid %s) that held back the "
                         "last one is still open", MESSAGE_TABLE, horizon)  # fmt: skip
            return False
        try:
            dialect.vacuum(connection)
        except DatabaseError as exc:
            # E.g. a statement_timeout: the next tick tries again; leadership stays.
            logger.warning("vacuum of %s failed: %s", MESSAGE_TABLE, exc)
            return False
        self._vacuumed_behind = horizon
        logger.info("vacuumed %s: %d dead row versions", MESSAGE_TABLE, dead)
        return True
