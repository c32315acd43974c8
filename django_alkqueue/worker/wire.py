"""What crosses the pipe between a worker and its process-pool children (process_pool.py,
child.py): the work sent down, and the handler's outcome sent back.

An outcome is plain data. A handler's return value goes as itself when it pickles, else as
`NotPortable` (the history then records it as not JSON). An exception goes as its kind, its
error text (written in the child, where the traceback is, with the queue's privacy applied)
and, when it pickles both ways, itself: Retry, Snooze, Fail, Cancelled, Sleeping and Waiting
(the end of a call by job.sleep and job.wait_for) are rebuilt from their fields (their
constructors do not take their own message back), any other exception from its pickle, or
as a `ChildError` naming its class when it does not unpickle. The retry policy's `retry_on`
then sees the handler's own exception class.
"""

from __future__ import annotations

import dataclasses
import pickle
from datetime import datetime
from typing import Any

from ..jobs import Job
from ..outcomes import Cancelled, Fail, Retry, Snooze
from ..sql.base import Claim
from ..steps import Sleeping, Waiting


class ChildError(Exception):
    """A child's exception that could not be rebuilt in the worker; its message is the
    original's `Class: message` line."""


@dataclasses.dataclass(frozen=True)
class NotPortable:
    """A return value that did not pickle: only its class name crosses."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name} object from a child process>"


@dataclasses.dataclass(frozen=True)
class Work:
    """One handler call for a child: one job, or a batch consumer's jobs."""

    queue: str
    jobs: list[Job]
    #: The deadline of the jobs' time limit (aware), and the limit in seconds.
    deadline: datetime | None
    timeout: float | None
    #: For an atomic consumer: the claim the child locks and acks in its own transaction.
    claim: Claim | None = None
    #: For a plain consumer's job: the claim its durable steps are recorded under.
    steps_claim: Claim | None = None


@dataclasses.dataclass(frozen=True)
class Raised:
    """An exception, as it crosses: its kind, its fields, its error text, its pickle."""

    kind: str  # "retry", "snooze", "fail", "cancelled", "sleep", "wait" or "error"
    fields: tuple[Any, ...]
    text: str
    pickled: bytes | None


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How the handler call ended in the child.

    - `returned`: the handler returned `value` (for an atomic consumer: and the ack
      committed);
    - `raised`: it raised `error` (for an atomic consumer: everything rolled back);
    - `lost`: an atomic consumer's claim was gone before the commit: all rolled back.
    Batch failures come back as the mapping the handler returned, each exception `Raised`.
    """

    kind: str
    value: Any = None
    error: Raised | None = None
    #: Seconds the handler ran, by the child's clock.
    duration: float = 0.0
    #: Whether the job has durable steps recorded (its ack deletes them).
    with_steps: bool = False


def portable_value(value: Any) -> Any:
    """`value` when it pickles, else NotPortable."""
    try:
        pickle.dumps(value)
    except Exception:
        return NotPortable(type(value).__name__)
    return value


def raised(error: BaseException, text: str) -> Raised:
    """`error` ready to cross, `text` its error text."""
    if isinstance(error, Retry):
        return Raised("retry", (error.delay, error.reason), text, None)
    if isinstance(error, Snooze):
        return Raised("snooze", (error.delay,), text, None)
    if isinstance(error, Fail):
        return Raised("fail", (error.reason,), text, None)
    if isinstance(error, Cancelled):
        return Raised("cancelled", (error.reason,), text, None)
    if isinstance(error, Sleeping):
        return Raised("sleep", (error.until,), text, None)
    if isinstance(error, Waiting):
        return Raised("wait", (error.name, error.deadline), text, None)
    try:
        pickled: bytes | None = pickle.dumps(error)
    except Exception:
        pickled = None
    return Raised("error", (), text, pickled)


def rebuilt(raised: Raised) -> BaseException:
    """The exception again, in the worker, its error text attached (`child_error_text`)."""
    error: BaseException
    if raised.kind == "retry":
        error = Retry(*raised.fields)
    elif raised.kind == "snooze":
        error = Snooze(*raised.fields)
    elif raised.kind == "fail":
        error = Fail(*raised.fields)
    elif raised.kind == "cancelled":
        error = Cancelled(*raised.fields)
    elif raised.kind == "sleep":
        error = Sleeping(*raised.fields)
    elif raised.kind == "wait":
        error = Waiting(*raised.fields)
    else:
        error = _unpickled(raised)
    error._alk_child_error_text = raised.text  # type: ignore[attr-defined]
    return error


def _unpickled(raised: Raised) -> BaseException:
    if raised.pickled is not None:
        try:
            error = pickle.loads(raised.pickled)
        except Exception:
            pass
        else:
            if isinstance(error, BaseException):
                return error
    return ChildError(raised.text.split("\n", 1)[0])


def child_error_text(error: BaseException) -> str | None:
    """The error text a child wrote for `error`, when it came from one."""
    text = getattr(error, "_alk_child_error_text", None)
    return text if isinstance(text, str) else None
