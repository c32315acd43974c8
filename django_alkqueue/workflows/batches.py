"""Batches: `with batch(on_success=..., on_finish=...)` groups the jobs enqueued in the block
and enqueues its callbacks once, when the last of them has finished.

The bookkeeping has no counter row. Each member has its own BatchMember row, and the
transaction that finishes a job (its ack, death or cancel) writes that row's outcome. The
batch is done when no member row is left unfinished, which the member index answers. The
finisher then looks for an unfinished member with FOR UPDATE SKIP LOCKED: a member another
transaction is finishing right now is locked and skipped, so the probe finds one only when
some member is truly still to run, and then someone else finishes last. Only a finisher
whose probe finds none locks the Batch row, and under that lock counts again with a fresh
statement, which sees every finisher that committed before it: of the last finishers, each
takes the lock in turn, all but the last still see another's member unfinished, and the
last sees none and fires. The Batch row's fired_at, set under the same lock, makes the
firing once only. docs/workflows.md walks through the interleavings."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from ..conf import get_settings
from ..exceptions import InvalidOption
from ..models import Batch, BatchMember
from ..payload import refuse_nul
from ..sql import chunked, dialect_for
from ..validation import database_alias, storable_text
from . import dependencies
from .specs import JobSpec

#: The key a callback's payload gains, holding {"batch": id}: namespaced, so that the
#: payload's own keys ("batch" included) stay the caller's.
CALLBACK_KEY = "_alkqueue"
#: What a finished member's row says.
OUTCOMES = ("succeeded", "dead", "cancelled")
_CHUNK = 500

#: The batch open on each database alias in this context (a thread, a task).
_open: contextvars.ContextVar[tuple[tuple[str, int], ...]] = contextvars.ContextVar(
    "alkqueue_open_batches", default=()
)


def open_batch(using: str) -> int | None:
    """The id of the batch whose block is open on this database here, if any."""
    for alias, batch_id in _open.get():
        if alias == using:
            return batch_id
    return None


def batch(
    on_success: JobSpec | None = None,
    on_finish: JobSpec | None = None,
    name: str = "",
    *,
    using: str | None = None,
) -> BatchBlock:
    """A block whose enqueues on `using` (ALKQUEUE["DATABASE"] by default) join one batch;
    see docs/workflows.md. InvalidOption, and nothing written, for a bad argument."""
    alias = database_alias(using if using is not None else get_settings().DATABASE)
    for role, spec in (("on_success", on_success), ("on_finish", on_finish)):
        _check_callback(role, spec, alias)
    if not isinstance(name, str) or len(name) > 200 or not storable_text(name):
        raise InvalidOption(
            "a batch's name must be a str of at most 200 characters, with no NUL and no "
            "unpaired surrogate"
        )
    return BatchBlock(alias, on_success, on_finish, name)


def _check_callback(role: str, spec: object, using: str) -> None:
    if spec is None:
        return
    if not isinstance(spec, JobSpec):
        raise InvalidOption(f"{role} takes a job built with Queue.job(), not {type(spec).__name__}")
    if spec.using != using:
        raise InvalidOption(f"{role}'s queue is on database {spec.using!r}, the batch on {using!r}")
    if spec.payload is not None and not isinstance(spec.payload, dict):
        raise InvalidOption(
            f"{role}'s payload must be a JSON object (it gains {CALLBACK_KEY!r}), not "
            f"{type(spec.payload).__name__}"
        )
    if isinstance(spec.payload, dict) and CALLBACK_KEY in spec.payload:
        raise InvalidOption(f"{role}'s payload must leave the key {CALLBACK_KEY!r} to the batch")
    refuse_nul(spec.payload, f"{role}'s payload")  # the Batch row keeps it in jsonb


class BatchBlock:
    """The context manager batch() returns; entering it writes the Batch row."""

    def __init__(
        self, using: str, on_success: JobSpec | None, on_finish: JobSpec | None, name: str
    ) -> None:
        self.using = using
        self.on_success = on_success
        self.on_finish = on_finish
        self.name = name
        self._token: contextvars.Token[tuple[tuple[str, int], ...]] | None = None
        self.batch: Batch | None = None

    def __enter__(self) -> Batch:
        if open_batch(self.using) is not None:
            raise InvalidOption(f"a batch is already open on database {self.using!r} here")
        row = Batch.objects.using(self.using).create(
            name=self.name,
            created_at=timezone.now(),
            on_success=None if self.on_success is None else self.on_success.stored(),
            on_finish=None if self.on_finish is None else self.on_finish.stored(),
        )
        self._token = _open.set((*_open.get(), (self.using, row.id)))
        self.batch = row
        return row

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._token is not None and self.batch is not None
        _open.reset(self._token)
        connection = connections[self.using]
        if exc is not None and connection.in_atomic_block:
            return  # its transaction rolls back (a batch left open never fires: docs)
        seal(self.using, self.batch.id, timezone.now())
        self.batch.refresh_from_db(using=self.using)


def join(using: str, batch_id: int, job_ids: Sequence[int]) -> None:
    """Inside the enqueue's transaction: the new jobs are members, their rows marked."""
    members = [BatchMember(job_id=job_id, batch_id=batch_id) for job_id in job_ids]
    BatchMember.objects.using(using).bulk_create(members, batch_size=_CHUNK)
    dependencies.mark_in_workflow(using, job_ids)


def seal(using: str, batch_id: int, now: datetime) -> None:
    """The block has ended: no member joins any more; fire now if all have finished (an
    empty batch at once)."""
    with transaction.atomic(using=using):
        Batch.objects.using(using).filter(pk=batch_id).update(sealed_at=now)
        fire_if_done(using, batch_id, now)


def finished(using: str, job_ids: Sequence[int], outcome: str, now: datetime) -> list[int]:
    """Inside the transaction that finished these jobs: their member rows say how; each
    batch this finishes fires. Returns the ids of the batches that fired."""
    connection = connections[using]
    dialect = dialect_for(connection)
    batch_ids: set[int] = set()
    for chunk in chunked(list(job_ids), _CHUNK):
        batch_ids |= dialect.finish_batch_members(connection, chunk, outcome)
    return [b for b in sorted(batch_ids) if fire_if_done(using, b, now)]


def fire_if_done(using: str, batch_id: int, now: datetime) -> bool:
    """Fire the batch if this transaction finished its last member (the module's docstring
    says why this is exactly once). Returns whether it fired."""
    members = BatchMember.objects.using(using).filter(batch_id=batch_id, outcome__isnull=True)
    if connections[using].features.has_select_for_update_skip_locked:
        probe = members.order_by().select_for_update(skip_locked=True)
        if probe.values_list("job_id", flat=True)[:1]:
            return False
    batches = Batch.objects.using(using).select_for_update()
    row = batches.filter(pk=batch_id, sealed_at__isnull=False, fired_at__isnull=True).first()
    if row is None or members.exists():
        return False
    _fire(using, row, now)
    return True


def _fire(using: str, row: Batch, now: datetime) -> None:
    """Enqueue the callbacks, in the caller's transaction, and note that they were."""
    members = BatchMember.objects.using(using).filter(batch_id=row.id)
    all_succeeded = not members.exclude(outcome="succeeded").exists()
    sent: dict[str, Any] = {"fired_at": now}
    if row.on_success is not None and all_succeeded:
        sent["success_job_id"] = _send(using, row.on_success, row.id)
    if row.on_finish is not None:
        sent["finish_job_id"] = _send(using, row.on_finish, row.id)
    Batch.objects.using(using).filter(pk=row.id).update(**sent)


def _send(using: str, stored: dict[str, Any], batch_id: int) -> int:
    spec = JobSpec.from_stored(stored, using)
    payload = {**(spec.payload or {}), CALLBACK_KEY: {"batch": batch_id}}
    return spec.enqueue(payload=payload).id


def reopen(using: str, job_id: int) -> None:
    """A requeued member is unfinished again (a batch that fired does not fire again)."""
    BatchMember.objects.using(using).filter(job_id=job_id).update(outcome=None)
