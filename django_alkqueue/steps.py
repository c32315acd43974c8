"""Durable steps (docs/durable-steps.md): `job.step(name, fn, *args, **kwargs)` calls `fn`
once per job, ever: its value is recorded under `name`, and every later run of the same job
gets the recorded value back without calling `fn`. `job.sleep(name, when)` and
`job.wait_for(name, timeout)` record a wake time and a signal's answer the same way; while
the job sleeps or waits, the handler call ends by raising `Suspended`, which the worker
turns into the job's state (back to scheduled, or waiting).

`Steps` holds one run's steps of one job: the names this run used, the values recorded by
earlier runs (read with the first step of the run) and the rules. Where they are read and
written is the worker's (worker/step_records.py): this layer does not speak to the database.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from . import validation
from .conf import get_settings
from .exceptions import InvalidOption, WaitTimedOut
from .outcomes import Cancelled
from .payload import decode, encode
from .validation import shown

#: The longest step name, in characters.
MAX_NAME_CHARS = 200

#: Why job.step, job.sleep and job.wait_for ({call}) are refused in an atomic consumer, and
#: in a batch consumer.
REFUSED_IN_ATOMIC = (
    "{call} cannot run in an atomic consumer: its record would roll back with the "
    "handler's transaction (docs/durable-steps.md)"
)
REFUSED_IN_BATCH = (
    "{call} cannot run in a batch consumer: a step belongs to one job, and a batch "
    "handler runs many in one call (docs/durable-steps.md)"
)
#: Why they are refused where no worker runs the job.
REFUSED_OUTSIDE_WORKER = "{call} runs only in a handler a worker calls (docs/durable-steps.md)"
#: The reason of the Cancelled a step raises when its record is refused.
CLAIM_LOST = "claim lost"

# The keys of the values job.sleep and job.wait_for record under their names.
#: A sleep's wake time (ISO 8601).
SLEEP_UNTIL = "sleep_until"
#: The payload of the signal a wait got.
SIGNAL = "signal"
#: A wait that reached its deadline: the deadline (ISO 8601).
TIMED_OUT = "timed_out"


class Suspended(BaseException):
    """Raised by job.sleep and job.wait_for to end the handler call while the job sleeps or
    waits; the worker catches it and moves the job (executor.py). A BaseException, so that a
    handler's `except Exception` does not swallow it; never seen outside the worker."""


class Sleeping(Suspended):
    """job.sleep: the job is scheduled again at `until` (aware or naive as USE_TZ says)."""

    def __init__(self, until: datetime) -> None:
        super().__init__(f"sleeping until {until.isoformat()}")
        self.until = until


class Waiting(Suspended):
    """job.wait_for: the job waits for the signal `name`, until `deadline` (None: for ever)."""

    def __init__(self, name: str, deadline: datetime | None) -> None:
        super().__init__(f"waiting for signal {name!r}")
        self.name = name
        self.deadline = deadline


def wake_time(when: object, now: datetime) -> datetime:
    """job.sleep's second argument as the time to wake: a duration (timedelta or seconds,
    positive) from `now`, or an aware datetime (naive when USE_TZ is off). InvalidOption
    for anything else."""
    if isinstance(when, datetime):
        if settings.USE_TZ and when.utcoffset() is None:
            raise InvalidOption("job.sleep needs an aware datetime, not a naive one")
        if not settings.USE_TZ and when.utcoffset() is not None:
            raise InvalidOption("job.sleep needs a naive datetime when USE_TZ is False")
        if abs(when - now) > validation.MAX_DURATION:
            raise InvalidOption(
                f"job.sleep's wake time must be within {validation.MAX_DURATION.days} days of now"
            )
        return when
    return now + timedelta(seconds=validation.seconds(when, "job.sleep's duration", positive=True))


def wait_timeout(timeout: object) -> float | None:
    """job.wait_for's timeout: None, or a positive duration (timedelta or seconds)."""
    if timeout is None:
        return None
    return validation.seconds(timeout, "timeout", positive=True)


def check_name(name: object) -> str:
    """A step's name, checked: InvalidOption unless a non-empty str of at most
    MAX_NAME_CHARS characters without NUL."""
    if not isinstance(name, str):
        raise InvalidOption(f"a step name must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidOption("a step name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidOption(
            f"a step name is at most {MAX_NAME_CHARS} characters, not {len(name)}: "
            f"{shown(name, repr, 50)}"
        )
    if "\x00" in name:
        raise InvalidOption(f"a step name must not hold a NUL character: {shown(name, repr)}")
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidOption(
                f"a step name must be valid text, not hold a lone surrogate: {shown(name, repr)}"
            ) from None
    return name


class Steps:
    """One run's steps of one job. Subclasses say where they are read and written:
    `_load` (the recorded values, by name, as JSON text), `_record` (write one, fenced by
    the claim; False when refused) and `_check_writable` (InvalidOption where a record
    could not commit before the step returns)."""

    __slots__ = ("_recorded", "_used", "wrote")

    def __init__(self) -> None:
        #: Names used by this run so far.
        self._used: set[str] = set()
        #: The values recorded by earlier runs (and this one), by name; None until loaded.
        self._recorded: dict[str, str] | None = None
        #: Whether this run recorded a step.
        self.wrote = False

    @property
    def any(self) -> bool:
        """Whether this job has steps recorded, as far as this run knows."""
        return self.wrote or bool(self._recorded)

    # -- what subclasses provide -------------------------------------------------------

    def _load(self) -> dict[str, str]:
        raise NotImplementedError

    def _record(self, name: str, text: str, duration: float) -> bool:
        raise NotImplementedError

    def _check_writable(self) -> None:
        """InvalidOption when a record made now could not commit before the step returns."""

    def _refuse(self, call: str) -> None:
        """InvalidOption, naming `call`, where this job may not use steps at all."""

    def _now(self) -> datetime:
        raise NotImplementedError

    def _signal(self, name: str) -> str | None:
        """The payload (JSON text) of the signal `name` sent to this job, or None."""
        raise NotImplementedError

    # -- the step ----------------------------------------------------------------------

    def _begin(self, name: object, call: str = "job.step") -> tuple[str, str | None]:
        """The name checked and taken for this run, and its recorded value (JSON text) or
        None. Loads the recorded values on the run's first step."""
        self._refuse(call)
        checked = check_name(name)
        if checked in self._used:
            raise InvalidOption(
                f"step {shown(checked, repr)} is used twice in one run of the handler: "
                "give each step its own name (e.g. f'part-{i}' in a loop)"
            )
        self._check_writable()
        if self._recorded is None:
            self._recorded = self._load()
        self._used.add(checked)
        return checked, self._recorded.get(checked)

    def _finish(self, name: str, value: Any, duration: float, slack: int = 0) -> Any:
        """Record `value` under `name`; returns it as later runs will get it (its JSON
        round trip). PayloadError, nothing recorded, when it is not storable; Cancelled
        when the claim is lost. `slack`: bytes allowed past MAX_PAYLOAD_BYTES (a signal's
        payload wrapped in the record of a wait)."""
        limit = get_settings().MAX_PAYLOAD_BYTES + slack
        text = encode(value, max_bytes=limit, path=f"step {name!r}")
        if not self._record(name, text, duration):
            raise Cancelled(CLAIM_LOST)
        assert self._recorded is not None
        self._recorded[name] = text
        self.wrote = True
        return decode(text)

    def run(self, name: object, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """job.step(): the recorded value, or fn's, recorded."""
        checked, recorded = self._begin(name)
        if recorded is not None:
            return decode(recorded)
        started = time.monotonic()
        value = fn(*args, **kwargs)
        return self._finish(checked, value, time.monotonic() - started)

    async def arun(self, name: object, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """await job.astep(): as run(), for a coroutine handler. `fn` may be a coroutine
        function (awaited) or a plain one (called on the event loop); the database is read
        and written off the loop, in Django's thread for sync code."""
        checked, recorded = await sync_to_async(self._begin, thread_sensitive=True)(name)
        if recorded is not None:
            return decode(recorded)
        started = time.monotonic()
        value = fn(*args, **kwargs)
        if isinstance(value, Awaitable):
            value = await value
        finish = sync_to_async(self._finish, thread_sensitive=True)
        return await finish(checked, value, time.monotonic() - started)

    # -- the sleep and the wait --------------------------------------------------------

    def sleep(self, name: object, when: object) -> None:
        """job.sleep(): returns once the wake time recorded under `name` has passed; until
        then raises Sleeping. The first time, records the wake time."""
        self._refuse("job.sleep")
        now = self._now()
        until = wake_time(when, now)
        checked, recorded = self._begin(name, "job.sleep")
        if recorded is not None:
            until = _recorded_time(decode(recorded), SLEEP_UNTIL, checked)
        else:
            self._finish(checked, {SLEEP_UNTIL: until.isoformat()}, 0.0)
        if until > now:
            raise Sleeping(until)

    def wait_for(self, name: object, timeout: object) -> Any:
        """job.wait_for(): the payload of the signal `name`, recorded; WaitTimedOut when the
        wait's deadline came first (recorded by the leader); else raises Waiting."""
        self._refuse("job.wait_for")
        seconds = wait_timeout(timeout)
        checked, recorded = self._begin(name, "job.wait_for")
        if recorded is not None:
            return _answer(decode(recorded), checked)
        sent = self._signal(checked)
        if sent is not None:
            value = self._finish(checked, {SIGNAL: decode(sent)}, 0.0, slack=64)
            return _answer(value, checked)
        deadline = None if seconds is None else self._now() + timedelta(seconds=seconds)
        raise Waiting(checked, deadline)

    async def asleep(self, name: object, when: object) -> None:
        """await job.asleep(): sleep(), its reads and writes off the event loop."""
        await sync_to_async(self.sleep, thread_sensitive=True)(name, when)

    async def await_for(self, name: object, timeout: object) -> Any:
        """await job.await_for(): wait_for(), its reads and writes off the event loop."""
        return await sync_to_async(self.wait_for, thread_sensitive=True)(name, timeout)


def _recorded_time(value: Any, key: str, name: str) -> datetime:
    """The time a sleep or a wait recorded under `name`; InvalidOption when `name` holds a
    step's value instead (one name used by a step and a sleep in different runs)."""
    if not isinstance(value, dict) or not isinstance(value.get(key), str):
        raise InvalidOption(f"{shown(name, repr)} names a recorded step, not a sleep")
    at = datetime.fromisoformat(value[key])
    if not settings.USE_TZ and at.utcoffset() is not None:
        at = at.replace(tzinfo=None)
    return at


def _answer(value: Any, name: str) -> Any:
    """What a wait recorded under `name` answers: the signal's payload, or WaitTimedOut."""
    if isinstance(value, dict) and SIGNAL in value:
        return value[SIGNAL]
    if isinstance(value, dict) and TIMED_OUT in value:
        raise WaitTimedOut(name)
    raise InvalidOption(f"{shown(name, repr)} names a recorded step, not a wait")


class RefusedSteps(Steps):
    """The steps of a job whose handler may not use them: every step, sleep and wait raises
    InvalidOption with why, before its fn is called."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def _refuse(self, call: str) -> None:
        raise InvalidOption(self.reason.format(call=call))


#: The steps of a job in an atomic consumer, of one in a batch consumer, and of one no
#: worker runs: shared, since a refusal changes nothing.
IN_ATOMIC = RefusedSteps(REFUSED_IN_ATOMIC)
IN_BATCH = RefusedSteps(REFUSED_IN_BATCH)
OUTSIDE_WORKER = RefusedSteps(REFUSED_OUTSIDE_WORKER)
