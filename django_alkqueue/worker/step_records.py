"""Where a claimed job's durable steps are read and written (docs/durable-steps.md): the
steps of one run, fenced by the job's claim, on the connection of the thread that runs
the handler (a thread-pool thread, a process-pool child, or Django's thread for sync code
of an `async def` handler)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.db import connections

from .. import operations, waits
from ..exceptions import InvalidOption
from ..sql import Claim
from ..steps import Steps


class ClaimedSteps(Steps):
    """The steps of a job this worker holds the claim of."""

    __slots__ = ("claim", "clock", "in_transaction", "using")

    def __init__(
        self,
        using: str,
        claim: Claim,
        clock: Callable[[], datetime],
        in_transaction: bool = False,
    ) -> None:
        super().__init__()
        self.using = using
        self.claim = claim
        self.clock = clock
        #: Whether a record inside a transaction is allowed: only under a test's own
        #: transaction (testing.py), which holds every write anyway.
        self.in_transaction = in_transaction

    def _load(self) -> dict[str, str]:
        return operations.load_steps(self.using, self.claim.id)

    def _record(self, name: str, text: str, duration: float) -> bool:
        return operations.record_step(self.using, self.claim, self.clock(), name, text, duration)

    def _now(self) -> datetime:
        return self.clock()

    def _signal(self, name: str) -> str | None:
        return waits.sent_signal(self.using, self.claim.id, name)

    def _check_writable(self) -> None:
        if not self.in_transaction and connections[self.using].in_atomic_block:
            raise InvalidOption(
                "job.step cannot run inside transaction.atomic: its record would commit "
                "with that transaction, not before the step returns (docs/durable-steps.md)"
            )
