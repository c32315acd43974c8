"""The queue API: `queue()` builds a `Queue` (a name plus the options its jobs are stamped
with); `Queue.claim()` hands out `JobHandle`s, through which a worker finishes each job.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, overload

from asgiref.sync import sync_to_async
from django.db import transaction

from . import (
    debounce,
    history,
    hooks,
    operations,
    tracing,
    unique_windows,
    validation,
    waits,
)
from . import defaults as _defaults
from .backoff import exponential_delay
from .clock import Clock, system_clock
from .conf import get_settings
from .consumers import registry
from .exceptions import InvalidOption, PayloadError
from .fair_share import FairShare
from .jobs import (
    FAILED,
    LIVE_STATES,
    MAX_ATTEMPTS_EXCEEDED,
    NO_KEYS,
    STATES,
    HistoryEntry,
    Job,
    JobKeys,
    Progress,
    QueueStats,
    Stamps,
)  # fmt: skip
from .limits import Limits, LimitsCache
from .payload import decode, encode
from .sql import Claim
from .steps import check_name
from .validation import Duration
from .workflows import batches, dependencies
from .workflows.specs import ENQUEUE_OPTIONS, QUEUE_OPTIONS, JobSpec, register_sender, spec_of

#: One claim call hands out at most this many jobs, whatever n asks for (the rule lives with
#: the other input rules, in validation.py, where a batch consumer's size is checked too).
MAX_CLAIM = validation.MAX_CLAIM

# The defaults under the names that the worker and older callers import.
DEFAULT_MAX_ATTEMPTS = _defaults.MAX_ATTEMPTS
DEFAULT_BACKOFF_BASE = _defaults.BACKOFF_BASE
DEFAULT_LEASE = _defaults.LEASE
DEFAULT_RETENTION = _defaults.RETENTION
DEFAULT_PRIORITY = _defaults.PRIORITY

_UNSET: Any = object()


class Queue:
    """A queue name and the options stamped on the jobs enqueued through it. Free to build."""

    def __init__(
        self,
        name: str,
        *,
        max_attempts: int,
        backoff_base: Duration,
        lease: Duration,
        retention: Duration | None,
        priority: int,
        expires: Duration | None,
        using: str,
        clock: Clock = system_clock,
        rng: random.Random | None = None,
    ) -> None:
        # Checked here, not only in queue(): a Queue built directly stamps its jobs too.
        self.name = validation.queue_name(name)
        self.max_attempts = validation.max_attempts(max_attempts)
        self.backoff_base = validation.seconds(backoff_base, "backoff_base")
        self.lease = validation.seconds(lease, "lease", positive=True)
        self.retention = validation.optional_seconds(retention, "retention")
        self.priority = validation.priority(priority)
        self.expires = validation.optional_seconds(expires, "expires")
        self.using = validation.database_alias(using)
        self.clock = validation.clock(clock)
        self.rng = validation.rng(rng)
        #: The limits in force, as claim() last read them (made at its first call).
        self._limits: LimitsCache | None = None

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} using={self.using!r}>"

    def _now(self) -> datetime:
        """The queue's clock, read and checked: a bad reading raises before anything is written.
        The system clock's reading follows USE_TZ by construction, so only another's is checked."""
        if self.clock is system_clock:
            return system_clock()
        return validation.clock_reading(self.clock())

    # -- enqueue ---------------------------------------------------------------------------

    @overload
    def enqueue(
        self,
        payload: Any,
        *,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        expires: Duration | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        unique_for: None = None,
        concurrency_key: str | None = None,
        fair_key: str | None = None,
        debounce_key: str | None = None,
        debounce: Duration | None = None,
        debounce_max: Duration | None = None,
        after: Iterable[Any] | None = None,
    ) -> Job: ...

    @overload
    def enqueue(
        self,
        payload: Any,
        *,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        expires: Duration | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        unique_for: Duration,
        concurrency_key: str | None = None,
        fair_key: str | None = None,
        debounce_key: str | None = None,
        debounce: Duration | None = None,
        debounce_max: Duration | None = None,
        after: Iterable[Any] | None = None,
    ) -> Job | None: ...

    def enqueue(
        self,
        payload: Any,
        *,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        expires: Duration | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        unique_for: Duration | None = None,
        concurrency_key: str | None = None,
        fair_key: str | None = None,
        debounce_key: str | None = None,
        debounce: Duration | None = None,
        debounce_max: Duration | None = None,
        after: Iterable[Any] | None = None,
    ) -> Job | None:
        """Write one job in the caller's transaction; see docs/queues.md for every rule, and
        docs/workflows.md for `after` (the jobs or ids it waits for). With `unique_for`, None
        when the key's window holds it for a job that has finished."""
        key = JobKeys(validation.concurrency_key(concurrency_key), validation.fair_key(fair_key))
        text = encode(payload, max_bytes=get_settings().MAX_PAYLOAD_BYTES)
        options = (delay, run_at, expires, max_attempts, priority, unique_key)
        rule = validation.debounce(debounce_key, debounce, debounce_max)
        if rule is not None:
            extra = {"delay": delay, "run_at": run_at, "unique_key": unique_key,
                     "unique_for": unique_for, "after": after}  # fmt: skip
            return self._debounce(text, rule, options, key, extra)
        window = validation.unique_for(unique_for, unique_key)
        if window is not None:
            return self._enqueue_in_window(text, window, options, key, after)
        keys = None if key == NO_KEYS else [key]
        return self._insert([text], 1, *options, keys=keys, after=after)[0]

    def _debounce(
        self,
        text: str,
        rule: validation.DebounceRule,
        options: tuple[object, ...],
        key: JobKeys,
        extra: Mapping[str, object],
    ) -> Job:
        """enqueue() with a debounce key: debounce.py."""
        given = sorted(name for name, value in extra.items() if value is not None)
        if given:
            raise InvalidOption(f"debounce_key cannot be combined with {', '.join(given)}")
        self._alone("debounce_key")
        now = self._now()
        wait = rule.seconds if rule.max_seconds is None else min(rule.seconds, rule.max_seconds)
        stamps = self._stamps(now, wait, *options[1:])
        deadline = None if rule.max_seconds is None else now + timedelta(seconds=rule.max_seconds)
        asked = debounce.Debounce(rule.key, now + timedelta(seconds=rule.seconds), deadline)
        return self._traced(
            stamps,
            lambda s: [debounce.enqueue_debounced(self.using, self.name, text, s, now, asked, key)],
        )[0]

    def _enqueue_in_window(
        self,
        text: str,
        window: float,
        options: tuple[object, ...],
        key: JobKeys,
        after: Iterable[Any] | None,
    ) -> Job | None:
        """enqueue() with unique_key and unique_for: unique_windows.py."""
        if after is not None:
            raise InvalidOption("unique_for cannot be combined with after")
        self._alone("unique_for")
        now = self._now()
        stamps = self._stamps(now, *options)
        lapses_at = now + timedelta(seconds=window)

        def write(s: Stamps) -> list[Job]:
            job = unique_windows.enqueue_in_window(
                self.using, self.name, text, s, now, lapses_at, key
            )
            return [] if job is None else [job]

        jobs = self._traced(stamps, write)
        return jobs[0] if jobs else None

    def _alone(self, option: str) -> None:
        """A debounced or windowed job joins no batch: the job an enqueue returns may be
        another's (docs/workflows.md)."""
        if batches.open_batch(self.using) is not None:
            raise InvalidOption(f"an enqueue with {option} cannot join a batch")

    def _traced(self, stamps: Stamps, write: Callable[[Stamps], list[Job]]) -> list[Job]:
        """`write` within the enqueue's span when tracing is on; then RUN_ON_COMMIT's hook."""
        if tracing.ENABLED and tracing.active():
            with tracing.enqueue_span(self.name, 1) as span:
                jobs = write(stamps._replace(trace_context=span.trace_context))
                span.written(jobs)
        else:
            jobs = write(stamps)
        if get_settings().RUN_ON_COMMIT:
            hooks.run_on_commit(jobs, self.using)
        return jobs

    def job(self, payload: Any, **options: Any) -> JobSpec:
        """A job described, not sent (no query): for batch callbacks and chain(). Its payload
        and options are checked now, as enqueue() would check them."""
        encode(payload, max_bytes=get_settings().MAX_PAYLOAD_BYTES)
        queue_options = {name: getattr(self, name) for name in QUEUE_OPTIONS}
        spec = spec_of(self.name, self.using, queue_options, payload, options)
        given = {name: options.get(name) for name in ENQUEUE_OPTIONS}
        validation.concurrency_key(given.pop("concurrency_key"))
        validation.fair_key(given.pop("fair_key"))
        self._stamps(self._now(), *given.values())
        return spec

    def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        delay: Duration | None = None,
        run_at: datetime | None = None,
        expires: Duration | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
        concurrency_key: str | Callable[[Any], str | None] | None = None,
        fair_key: str | Callable[[Any], str | None] | None = None,
        after: Iterable[Any] | None = None,
        unique_for: Duration | None = None,
        debounce_key: str | None = None,
        debounce: Duration | None = None,
        debounce_max: Duration | None = None,
    ) -> list[Job]:
        """Many jobs, one clock read, one statement (COPY on PostgreSQL); all or nothing.

        `concurrency_key` and `fair_key` are each one key for every job, or a callable
        payload -> key (or None) called once per payload before anything is written. A
        debounce key or unique_for is refused (InvalidOption): each concerns one job."""
        refused = {"debounce_key": debounce_key, "debounce": debounce,
                   "debounce_max": debounce_max, "unique_for": unique_for}  # fmt: skip
        for name, value in refused.items():
            if value is not None:
                raise InvalidOption(f"enqueue_many takes no {name}: enqueue() one job with it")
        if isinstance(payloads, str | bytes | bytearray | memoryview | dict) or not isinstance(
            payloads, Iterable
        ):
            raise PayloadError(
                f"payloads must be an iterable of payloads, not a {type(payloads).__name__} "
                "(to enqueue one payload, use enqueue())"
            )
        items = list(payloads)
        keys = _keys_of(items, concurrency_key, fair_key)
        limit = get_settings().MAX_PAYLOAD_BYTES
        # Encoded lazily, chunk by chunk, while the rows before are written (operations.enqueue)
        texts = (encode(p, max_bytes=limit, path=f"payloads[{i}]") for i, p in enumerate(items))
        options = (delay, run_at, expires, max_attempts, priority, unique_key)
        return self._insert(texts, len(items), *options, keys=keys, after=after)

    def _insert(
        self,
        texts: Iterable[str],
        count: int,
        delay: object,
        run_at: object,
        expires: object,
        max_attempts: object,
        priority: object,
        unique_key: object,
        *,
        keys: list[JobKeys] | None = None,
        after: Iterable[Any] | None = None,
    ) -> list[Job]:
        now = self._now()
        stamps = self._stamps(now, delay, run_at, expires, max_attempts, priority, unique_key)
        waits_for = dependencies.dependency_ids(after)
        if not count:  # validated all the same: a bad option is refused whatever the batch
            return []
        in_batch = batches.open_batch(self.using)
        if waits_for or in_batch is not None:
            with transaction.atomic(using=self.using):
                jobs = self._insert_in_workflow(
                    texts, count, stamps, now, keys, waits_for, in_batch
                )
        else:
            jobs = self._write(texts, count, stamps, now, keys)
        if get_settings().RUN_ON_COMMIT:
            hooks.run_on_commit([job for job in jobs if job.state != "waiting"], self.using)
        return jobs

    def _write(
        self,
        texts: Iterable[str],
        count: int,
        stamps: Stamps,
        now: datetime,
        keys: list[JobKeys] | None,
    ) -> list[Job]:
        if tracing.ENABLED and tracing.active():
            with tracing.enqueue_span(self.name, count) as span:
                stamps = stamps._replace(trace_context=span.trace_context)
                jobs = operations.enqueue(self.using, self.name, texts, count, stamps, now, keys)
                span.written(jobs)
            return jobs
        return operations.enqueue(self.using, self.name, texts, count, stamps, now, keys)

    def _insert_in_workflow(
        self,
        texts: Iterable[str],
        count: int,
        stamps: Stamps,
        now: datetime,
        keys: list[JobKeys] | None,
        waits_for: list[int],
        in_batch: int | None,
    ) -> list[Job]:
        """Inside one transaction: the jobs, waiting (no run_at) while any dependency is live,
        their edges, and their batch membership. A job a unique key found already live joins
        nothing."""
        live = dependencies.live_dependencies(self.using, waits_for)
        due = stamps.run_at
        if live:
            stamps = stamps._replace(run_at=None)
        jobs = self._write(texts, count, stamps, now, keys)
        written = [job for job in jobs if job.enqueued_at == now]
        if live and written:
            dependencies.wait_for(self.using, written, live, due)
            jobs = [
                dataclasses.replace(job, state="waiting", run_at=due)
                if job.enqueued_at == now else job
                for job in jobs
            ]  # fmt: skip
        if in_batch is not None and written:
            batches.join(self.using, in_batch, [job.id for job in written])
        return jobs

    def _stamps(
        self,
        now: datetime,
        delay: object,
        run_at: object,
        expires: object,
        max_attempts: object,
        priority: object,
        unique_key: object,
    ) -> Stamps:
        """Options resolved over the queue's stamps, with one clock reading (`now`)."""
        # Both are checked even when both are given: delay wins, but a bad run_at is refused.
        wait = None if delay is None else validation.seconds(delay, "delay")
        at = None if run_at is None else validation.run_at(run_at, now)
        if wait is not None:
            due = now + timedelta(seconds=wait)
        elif at is not None:
            due = at
        else:
            due = now
        lifetime = self.expires if expires is None else validation.seconds(expires, "expires")
        expires_at = None if lifetime is None else now + timedelta(seconds=lifetime)
        return Stamps(
            priority=self.priority if priority is None else validation.priority(priority),
            max_attempts=(
                self.max_attempts if max_attempts is None
                else validation.max_attempts(max_attempts)
            ),
            backoff_base=self.backoff_base,
            lease=self.lease,
            retention=self.retention,
            run_at=due,
            enqueued_at=now,
            expires_at=expires_at,
            unique_key=None if unique_key is None else validation.unique_key(unique_key),
        )  # fmt: skip

    # -- claim -----------------------------------------------------------------------------

    def claim(self, worker_id: str, n: int = 1) -> list[JobHandle]:
        """Hand out at most n due jobs: highest priority first, then oldest run_at, then id;
        within the queue's limits (docs/flow-control.md), which this Queue reads again once
        limits.REFRESH_EVERY seconds of its clock have passed, taking turns between fair keys
        while the queue has unclaimed jobs with one (docs/fair-share.md), read for each claim."""
        validation.worker_id(worker_id)
        validation.batch_size(n)
        if n <= 0:
            return []
        now = self._now()
        if self._limits is None:
            self._limits = LimitsCache()
        limits = self._limits.get(self.name, self.using, now.timestamp())
        return self._claim(worker_id, n, now, limits, self._fair_share()).handles

    def claim_within(
        self, worker_id: str, n: int, limits: Limits, fair: FairShare | None = _UNSET
    ) -> ClaimOutcome:
        """claim() within `limits` and taking the turns of `fair`, both read by the caller (a
        worker's flow state; `fair` left out: read now), saying what the limits did: whether
        they held the claim back, and when the rate frees room."""
        validation.worker_id(worker_id)
        validation.batch_size(n)
        if n <= 0:
            return ClaimOutcome([], False, None)
        if fair is _UNSET:
            fair = self._fair_share()
        return self._claim(worker_id, n, self._now(), limits, fair)

    def _fair_share(self) -> FairShare | None:
        return operations.fair_share_in_force(self.name, using=self.using)

    def _claim(
        self, worker_id: str, n: int, now: datetime, limits: Limits, fair: FairShare | None
    ) -> ClaimOutcome:
        claimed = operations.claim(
            self.using, self.name, worker_id, min(n, MAX_CLAIM), now, limits, self._now,
            fair=fair,
        )  # fmt: skip
        handles = [JobHandle(self, job, claim) for job, claim in claimed.handed]
        return ClaimOutcome(handles, claimed.held_back, claimed.room_in)

    def claim_one(self, worker_id: str) -> JobHandle | None:
        handles = self.claim(worker_id, 1)
        return handles[0] if handles else None

    # -- queue-level operations ------------------------------------------------------------

    def ack_batch(self, ids: Sequence[int]) -> int:
        """Ack each id that is claimed with a live lease, by any worker; returns the count."""
        if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
            raise InvalidOption(f"ids must be an iterable of job ids, not {type(ids).__name__}")
        checked = [validation.job_id(i) for i in ids]
        return operations.ack_batch(self.using, self.name, checked, self.clock())

    def cancel(self, job_id: int) -> bool:
        """Remove a live job in any state. Its claimer's ack will then return False; a
        running job's handler sees `job.cancelled` (docs/running-jobs.md)."""
        return operations.cancel(self.using, validation.job_id(job_id), self.name, self.clock())

    def signal(self, job_id: int, name: str, payload: Any = None) -> bool:
        """Send the signal `name` with `payload` to a live job of this queue (pending,
        scheduled, claimed or waiting): `job.wait_for(name)` returns the payload; a job
        waiting for it becomes pending now (docs/durable-steps.md). False for an unknown or
        finished job, or one that has a signal of that name already (the first stays).
        InvalidOption for a bad name (the rules of step names), PayloadError for a payload
        not storable as a job's is. Inside a transaction, it commits or rolls back with it."""
        checked_id = validation.job_id(job_id)
        checked = check_name(name)
        text = encode(payload, max_bytes=get_settings().MAX_PAYLOAD_BYTES, path="signal payload")
        return waits.send(self.using, checked_id, checked, decode(text), self.clock(), self.name)

    def get_job(self, job_id: int) -> Job | None:
        """A live job, a dead letter (state "dead") or a job in the history (state "succeeded" or
        "cancelled": docs/running-jobs.md), or None; a claimed job carries the progress its
        handler last reported (`Job.progress`)."""
        return operations.get_job(self.using, validation.job_id(job_id), self.clock(), self.name)

    def requeue(self, job_id: int) -> Job | None:
        """A dead letter back to live: same id, payload and options, attempts 0, run_at now."""
        return operations.requeue(self.using, validation.job_id(job_id), self._now(), self.name)

    def sweep_expired(self) -> int:
        """Expired jobs -> dead letters ("expired"); old dead letters deleted. Returns moved."""
        return operations.sweep_expired(self.using, self.name, self._now(), self.retention)

    def depth(self) -> int:
        return operations.depth(self.using, self.name)

    def depth_pending(self) -> int:
        return operations.depth_pending(self.using, self.name, self.clock())

    def has_due(self) -> bool:
        """Whether a due, unclaimed job is here, read without waiting for or skipping locks."""
        return operations.has_due(self.using, self.name, self.clock())

    def stats(self) -> QueueStats:
        return operations.stats(self.using, self.name, self.clock())

    def set_fair_weight(self, key: str, weight: int | None) -> int:
        """The jobs per round of fair key `key` (1..1000; None drops the weight set here, so
        the settings' applies, else 1): docs/fair-share.md. Returns the weight in force."""
        return operations.set_fair_weight(self.name, key, weight, using=self.using)

    def purge(self, states: Iterable[str] = ("pending", "scheduled")) -> int:
        """Delete this queue's live jobs in the given states ("dead" clears its dead letters)."""
        chosen = validation.states(states, STATES)
        return operations.purge(self.using, self.name, chosen, self._now())

    # -- async -----------------------------------------------------------------------------
    # Django (through 6.1) has no async database connection, so each of these runs its
    # synchronous twin through asgiref's sync_to_async in Django's one thread for database
    # work (thread_sensitive), which keeps a caller's sync atomic blocks on one connection.

    @overload
    async def aenqueue(self, payload: Any, *, unique_for: None = None, **options: Any) -> Job: ...

    @overload
    async def aenqueue(
        self, payload: Any, *, unique_for: Duration, **options: Any
    ) -> Job | None: ...

    async def aenqueue(
        self, payload: Any, *, unique_for: Duration | None = None, **options: Any
    ) -> Job | None:
        """`enqueue` for async code; see docs/queues.md ("From async code")."""
        options["unique_for"] = unique_for
        return await sync_to_async(self.enqueue)(payload, **options)

    async def aenqueue_many(self, payloads: Iterable[Any], **options: Any) -> list[Job]:
        return await sync_to_async(self.enqueue_many)(payloads, **options)

    async def aget_job(self, job_id: int) -> Job | None:
        return await sync_to_async(self.get_job)(job_id)

    async def acancel(self, job_id: int) -> bool:
        return await sync_to_async(self.cancel)(job_id)

    async def arequeue(self, job_id: int) -> Job | None:
        return await sync_to_async(self.requeue)(job_id)

    async def asignal(self, job_id: int, name: str, payload: Any = None) -> bool:
        return await sync_to_async(self.signal)(job_id, name, payload)


def _keys_of(items: list[Any], concurrency: object, fair: object) -> list[JobKeys] | None:
    """Each payload's concurrency and fair keys (checked), or None when no job has one."""
    if concurrency is None and fair is None:
        return None
    concurrency_keys = _each_key(items, concurrency, validation.concurrency_key)
    fair_keys = _each_key(items, fair, validation.fair_key)
    return [JobKeys(*pair) for pair in zip(concurrency_keys, fair_keys, strict=True)]


def _each_key(
    items: list[Any], key: object, check: Callable[[object], str | None]
) -> list[str | None]:
    """One key per payload: `key` itself, or what `key(payload)` returns; each checked."""
    if not callable(key):
        return [check(key)] * len(items)
    keys = []
    for index, item in enumerate(items):
        try:
            keys.append(check(key(item)))
        except InvalidOption as exc:
            raise InvalidOption(f"payloads[{index}]: {exc}") from None
    return keys


class ClaimOutcome(NamedTuple):
    """What Queue.claim_within did: the handles of the jobs it handed out (in handout
    order), whether the queue's limits held it back (it came back short, and not only because
    no job was due: a slot's ack then frees room a claim waits for), and in how many seconds
    the queue's rate frees room when its window was spent (else None)."""

    handles: list[JobHandle]
    held_back: bool
    room_in: float | None


class JobHandle:
    """A claimed job and the claim token that proves it is still ours.

    Each operation returns True when done and False when refused: the row is gone, carries
    another token, or the lease lapsed. A refusal is never an exception.
    """

    #: Set by the worker when the job's handler recorded durable steps, or found some: its
    #: ack deletes them (docs/durable-steps.md). A class attribute, so that a job without
    #: steps costs its handle nothing.
    with_steps = False

    def __init__(self, queue: Queue, job: Job, claim: Claim) -> None:
        self.queue = queue
        self.job = job
        #: What fences this handle's operations (the job id and its claim token).
        self.claim = claim
        self.lease_expires_at = job.lease_expires_at
        self._finished = False
        #: What the history keeps of this job when it is acked (jobs.HistoryEntry; None when
        #: its queue keeps none): set by the worker when the handler returns, else worked out
        #: at the ack, without output.
        self.entry: HistoryEntry | None = None
        self._recorded = False

    def __repr__(self) -> str:
        return f"<JobHandle {self.job.queue}#{self.job.id} attempt {self.job.attempts}>"

    @property
    def token(self) -> uuid.UUID:
        return self.claim.token

    def ack(self) -> bool:
        """The job is done: it leaves the live table (and, when its queue keeps history,
        goes to the history in the same transaction)."""
        if self._finished:
            return False
        acked = operations.ack(
            self.queue.using, [self.claim], self.queue.clock(), [self.history_entry()]
        )
        return self._finish(self.claim in acked)

    def remove(self) -> bool:
        """The handler cancelled its own job: it leaves the live table like an ack, fenced
        by the claim, but nothing goes to the history as "succeeded"."""
        if self._finished:
            return False
        removed = operations.ack(self.queue.using, [self.claim], self.queue.clock(), [None])
        return self._finish(self.claim in removed)

    def record(self, output: Any, duration: float | None) -> None:
        """The handler returned `output` after `duration` seconds: what the ack keeps."""
        self.entry = history.entry_for(self.job.queue, output, duration)
        self._recorded = True

    def history_entry(self) -> HistoryEntry | None:
        """What the ack writes to the history: the recorded HistoryEntry, else the queue's keep
        with no output; None when the queue keeps none."""
        if self._recorded:
            return self.entry
        return history.entry_for(self.job.queue, None, None)

    def retry(self, error: str | None = None, delay: Duration | None = None) -> bool:
        """Run again after `delay`, or after the backoff curve; dead-letter when out of attempts."""
        if self._finished:
            return False
        wait = None if delay is None else validation.seconds(delay, "delay")
        text = validation.clean_error_text(error)
        now = self.queue.clock()
        if self.job.attempts >= self.job.max_attempts:
            reason = MAX_ATTEMPTS_EXCEEDED
            dead = operations.fail(
                self.queue.using, self.claim, now, reason, text if text is not None else reason
            )
            return self._finish(dead is not None)
        if wait is None:
            wait = exponential_delay(self.job.attempts, self.job.backoff_base, rng=self.queue.rng)
        run_at = now + timedelta(seconds=wait)
        return self._finish(operations.retry(self.queue.using, self.claim, now, run_at, text))

    def snooze(self, delay: Duration) -> bool:
        """Back to pending after `delay`, the attempt refunded and the last error kept."""
        if self._finished:
            return False
        wait = validation.seconds(delay, "delay")
        now = self.queue.clock()
        run_at = now + timedelta(seconds=wait)
        return self._finish(operations.snooze(self.queue.using, self.claim, now, run_at))

    def sleep(self, until: datetime) -> bool:
        """The handler sleeps (job.sleep): scheduled again at `until`, the attempt refunded."""
        if self._finished:
            return False
        return self._finish(operations.snooze(self.queue.using, self.claim, self.queue.clock(),
                                              until))  # fmt: skip

    def wait(self, name: str, deadline: datetime | None) -> bool:
        """The handler waits for the signal `name` (job.wait_for): waiting until it comes or
        `deadline` passes, the attempt refunded."""
        if self._finished:
            return False
        return self._finish(waits.wait(self.queue.using, self.claim, self.queue.clock(), name,
                                       deadline))  # fmt: skip

    def fail(self, error: str | None = None) -> bool:
        """Dead-letter now."""
        if self._finished:
            return False
        text = validation.clean_error_text(error)
        dead = operations.fail(
            self.queue.using, self.claim, self.queue.clock(), FAILED,
            text if text is not None else FAILED,
        )  # fmt: skip
        return self._finish(dead is not None)

    def heartbeat(self, extend: Duration | None = None) -> bool:
        """Reset the lease to now + extend (default: the job's lease). Repeatable."""
        if self._finished:
            return False
        seconds = (
            self.job.lease
            if extend is None
            else validation.seconds(extend, "extend", positive=True)
        )
        now = self.queue.clock()
        expires = now + timedelta(seconds=seconds)
        extended = operations.heartbeat(self.queue.using, [(self.claim, expires)], now)
        if self.claim in extended:
            self.lease_expires_at = expires
            return True
        return False

    def release(self) -> bool:
        """Give the job back unfinished: pending now, this attempt not counted."""
        if self._finished:
            return False
        return self._finish(operations.release(self.queue.using, self.claim, self.queue.clock()))

    def settled_by_worker(self) -> None:
        """The worker moved this job itself, not through the handle (an atomic consumer's ack
        in the handler's transaction, a crash counted when a loop died): the handle is
        finished, as after its own ack, and refuses every later operation."""
        self._finished = True

    def _finish(self, done: bool) -> bool:
        self._finished = self._finished or done
        return done


def record_history_all(handles: Sequence[JobHandle], entry: HistoryEntry | None) -> None:
    """record() with the HistoryEntry made already, for the jobs of one batch handler call: it
    makes one for all its jobs (`history.entry_for` once, not once per job)."""
    for handle in handles:
        handle.entry = entry
        handle._recorded = True


def ack_handles(handles: Sequence[JobHandle], using: str) -> set[Claim]:
    """Ack many handles in one statement (one commit); each still fenced by its own claim.
    Returns the claims acked: a batch may hold two claims of one job (an old one whose lease
    lapsed, and the reclaim), and only the live one is acked."""
    live = [h for h in handles if not h._finished]
    if not live:
        return set()
    # history_entry() inline: one method call fewer per job on a draining worker's ack.
    entries = [h.entry if h._recorded else h.history_entry() for h in live]
    # Steps go with the ack unless the history keeps them (docs/durable-steps.md).
    drop = {
        h.claim.id for h, done in zip(live, entries, strict=True) if h.with_steps and done is None
    }
    acked = operations.ack(
        using, [h.claim for h in live], live[0].queue.clock(), entries, drop_steps=drop
    )
    for handle in live:  # _finish() inline: each of them is unfinished so far
        handle._finished = handle.claim in acked
    return acked


def heartbeat_handles(
    handles: Sequence[JobHandle], using: str, progress: Mapping[Claim, Progress] | None = None
) -> set[Claim]:
    """Heartbeat many handles in one statement, writing the new `progress` of some with it;
    returns the claims whose lease was extended."""
    live = [h for h in handles if not h._finished]
    if not live:
        return set()
    now = live[0].queue.clock()
    heartbeats = [(h.claim, now + timedelta(seconds=h.job.lease)) for h in live]
    extended = operations.heartbeat(using, heartbeats, now, progress)
    for handle, (claim, expires) in zip(live, heartbeats, strict=True):
        if claim in extended:
            handle.lease_expires_at = expires
    return extended


def held_claims(handles: Sequence[JobHandle], using: str) -> set[Claim]:
    """Of these handles' claims, those their rows still carry with a live lease, as last
    committed: read without waiting for the locks a heartbeat skipped."""
    if not handles:
        return set()
    return operations.claims_held(using, [h.claim for h in handles], handles[0].queue.clock())


def queue(
    name: str,
    *,
    max_attempts: int | None = None,
    backoff_base: Duration | None = None,
    lease: Duration | None = None,
    retention: Duration | None = _UNSET,
    priority: int | None = None,
    expires: Duration | None = None,
    using: str | None = None,
    clock: Clock = system_clock,
    rng: random.Random | None = None,
) -> Queue:
    """A Queue for `name`. Options left out come from the queue's consumer, else the defaults
    (max_attempts 5, backoff_base 5 s, lease 30 s, retention 7 days, priority 0, no expiry).
    """
    validation.queue_name(name)
    defaults = _consumer_defaults(name)
    return Queue(
        name,
        max_attempts=(
            max_attempts if max_attempts is not None
            else defaults.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
        ),
        backoff_base=(
            backoff_base if backoff_base is not None
            else defaults.get("backoff_base", DEFAULT_BACKOFF_BASE)
        ),
        lease=lease if lease is not None else defaults.get("lease", DEFAULT_LEASE),
        retention=DEFAULT_RETENTION if retention is _UNSET else retention,
        priority=DEFAULT_PRIORITY if priority is None else priority,
        expires=expires,
        using=using if using is not None else get_settings().DATABASE,
        clock=clock,
        rng=rng,
    )  # fmt: skip


def _consumer_defaults(name: str) -> dict[str, Any]:
    """The stamps the registered @consumer of `name` gives its queue, if there is one."""
    spec = registry.get(name)
    return spec.queue_defaults() if spec is not None else {}


def enqueue_spec(spec: JobSpec, after: Sequence[Any] | None = None, payload: Any = None) -> Job:
    """Send a JobSpec now, in the caller's transaction, as its queue would (JobSpec.enqueue
    and a fired batch's callbacks call this, specs.register_sender); `payload`, when given,
    replaces its own."""
    sent = spec.payload if payload is None else payload
    built = Queue(spec.queue, using=spec.using, **spec.queue_options)
    job: Job = built.enqueue(sent, after=after, **spec.options)
    return job


register_sender(enqueue_spec)

_QUEUE_ONLY_OPTIONS = ("backoff_base", "lease", "retention", "using", "clock", "rng")


@overload
def enqueue(queue_name: str, payload: Any, *, unique_for: None = None, **options: Any) -> Job: ...


@overload
def enqueue(
    queue_name: str, payload: Any, *, unique_for: Duration, **options: Any
) -> Job | None: ...


def enqueue(
    queue_name: str, payload: Any, *, unique_for: Duration | None = None, **options: Any
) -> Job | None:
    """Shortcut for `queue(queue_name, ...).enqueue(payload, ...)`: options that only a queue
    takes (backoff_base, lease, retention, using) go to `queue()`, the rest to `enqueue()`.
    """
    queue_options = {k: options.pop(k) for k in _QUEUE_ONLY_OPTIONS if k in options}
    options["unique_for"] = unique_for
    job: Job | None = queue(queue_name, **queue_options).enqueue(payload, **options)
    return job


@overload
async def aenqueue(
    queue_name: str, payload: Any, *, unique_for: None = None, **options: Any
) -> Job: ...


@overload
async def aenqueue(
    queue_name: str, payload: Any, *, unique_for: Duration, **options: Any
) -> Job | None: ...


async def aenqueue(
    queue_name: str, payload: Any, *, unique_for: Duration | None = None, **options: Any
) -> Job | None:
    """`enqueue` for async code, with the same options."""
    options["unique_for"] = unique_for
    return await sync_to_async(enqueue)(queue_name, payload, **options)


__all__ = [
    "LIVE_STATES",
    "Job",
    "JobHandle",
    "Queue",
    "QueueStats",
    "aenqueue",
    "enqueue",
    "queue",
]
