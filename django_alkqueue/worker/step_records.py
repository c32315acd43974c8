"""Where a claimed job's durable steps are read and written (docs/durable-steps.md): the
steps of one run, fenced by the job's claim, on the connection of the thread that runs
the handler (a thread-pool thread, a process-pool child, or Django's thread for sync code
of an `async def` handler).

A run reads its job's recorded steps with its first step. The jobs of one claim read theirs
together (ClaimStepsLoad): the first to ask reads every one's in one statement, so a drain
of woken sleepers pays a round trip per claim, not one per job; a handler that never uses
steps reads none."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import connections

from .. import operations, waits
from ..exceptions import InvalidOption
from ..queues import JobHandle
from ..sql import Claim
from ..steps import Steps


class ClaimStepsLoad:
    """The recorded steps of one claim's jobs, read in one statement when the first of them
    asks (operations.load_claimed_steps), then handed to each job once.

    The read is fenced by the claims: a job whose claim was no longer valid is left out,
    and reads its own as before. A job's steps change only through the holder of its claim
    (a record is fenced by the claim token), so what was read stays true while the claim
    does: each job's are handed over only while its lease, as last extended by this worker,
    has not lapsed; past it the job reads its own again."""

    __slots__ = ("_handles", "_loaded", "_lock", "using")

    def __init__(self, using: str, handles: Sequence[JobHandle]) -> None:
        self.using = using
        self._handles = handles
        self._lock = threading.Lock()
        #: Each job's handle and steps as read, by claim; None until the first job asks.
        self._loaded: dict[Claim, tuple[JobHandle, dict[str, str]]] | None = None

    def take(self, claim: Claim, now: datetime) -> dict[str, str] | None:
        """The steps of `claim`'s job as read with the others (read now if none asked
        before); None when it must read its own: its claim was not valid at the read, its
        lease has lapsed since, or it took them already."""
        with self._lock:  # the jobs that ask while the read runs wait for it, not read twice
            if self._loaded is None:
                self._loaded = self._read(now)
            handle, steps = self._loaded.pop(claim, (None, None))
        if handle is None or handle.lease_expires_at is None or now >= handle.lease_expires_at:
            return None
        return steps

    def _read(self, now: datetime) -> dict[Claim, tuple[JobHandle, dict[str, str]]]:
        claims = [handle.claim for handle in self._handles]
        read = operations.load_claimed_steps(self.using, claims, now)
        return {h.claim: (h, read[h.claim.id]) for h in self._handles if h.claim.id in read}


class ClaimedSteps(Steps):
    """The steps of a job this worker holds the claim of."""

    __slots__ = ("claim", "clock", "in_transaction", "shared", "using")

    def __init__(
        self,
        using: str,
        claim: Claim,
        clock: Callable[[], datetime],
        in_transaction: bool = False,
        shared: ClaimStepsLoad | None = None,
    ) -> None:
        super().__init__()
        self.using = using
        self.claim = claim
        self.clock = clock
        #: Whether a record inside a transaction is allowed: only under a test's own
        #: transaction (testing.py), which holds every write anyway.
        self.in_transaction = in_transaction
        #: The read of its claim's steps this job shares; None: it reads its own.
        self.shared = shared

    def _load(self) -> dict[str, str]:
        if self.shared is not None:
            steps = self.shared.take(self.claim, self.clock())
            if steps is not None:
                return steps
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
