"""The leader's history sweep: jobs in the history past their delete_after go, and on PostgreSQL the
coming days' partitions are made ahead (docs/running-jobs.md, "History and recorded
output")."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NamedTuple

from .. import operations, waits
from ..conf import get_settings

logger = logging.getLogger("django_alkqueue")

#: Rows one delete statement removes: each batch is its own short transaction.
BATCH = 5_000


class HistorySweep(NamedTuple):
    deleted: int


class HistoryService:
    """Each tick: make the history's room ahead (PostgreSQL's day partitions), then delete
    what is past its keep (PostgreSQL drops whole day partitions where it can)."""

    name = "history"

    def __init__(self, using: str, batch: int = BATCH) -> None:
        self.using = using
        self.batch = batch

    @property
    def interval(self) -> float:
        return get_settings().SWEEP_INTERVAL

    def run_once(self, now: datetime) -> HistorySweep:
        operations.prepare_history(self.using, now)
        deleted = operations.sweep_history(self.using, now, self.batch)
        if deleted:
            logger.info("history sweep: deleted %d jobs in the history past their keep", deleted)
        # Then the durable steps of jobs gone without an ack: cancelled, purged, expired here
        # or from the dead letters (docs/durable-steps.md).
        steps = operations.sweep_steps(self.using, self.batch)
        if steps:
            logger.info("history sweep: deleted %d steps and signals of jobs that are gone",
                        steps)  # fmt: skip
        waits.sweep_gone(self.using, self.batch)  # the waits of jobs cancelled or purged
        return HistorySweep(deleted)
