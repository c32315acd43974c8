"""The one exception tree of django-alkqueue: everything we raise derives from AlkQueueError."""


class AlkQueueError(Exception):
    """Base class of every error django-alkqueue raises on purpose."""


class InvalidName(AlkQueueError, ValueError):
    """A queue name or worker id that breaks the naming rules (see docs/queues.md)."""


class InvalidOption(AlkQueueError, ValueError):
    """An option out of range: max_attempts < 1, a negative or non-finite duration, ..."""


class PayloadError(AlkQueueError, ValueError):
    """A payload that cannot be stored as JSON exactly, or that is too large."""


class UnsupportedDatabase(AlkQueueError, NotImplementedError):
    """A database without SELECT ... FOR UPDATE SKIP LOCKED and without a dialect of its own
    (docs/databases.md); system check alkqueue.E101 reports it at start-up."""


class WaitTimedOut(AlkQueueError):
    """`job.wait_for(name, timeout=...)` reached its deadline before the signal `name` came
    (docs/durable-steps.md). Recorded: every later run of the job gets it again from the same
    `wait_for`. The handler may catch it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no signal {name!r} came before the wait's deadline")
        self.name = name


class TimeLimitExceeded(AlkQueueError):
    """A handler ran past its consumer's `timeout`: the error its attempt fails with
    (docs/running-jobs.md). The worker records it; handlers never need to raise it."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"ran longer than {timeout:g} s")
        self.timeout = timeout


class WorkerChildDied(AlkQueueError):
    """A process-pool child ended while it ran a job (killed by a signal from outside, a
    segfault, os._exit): the error that attempt fails with (docs/running-jobs.md).
    `crashed` tells whether the job took its child down itself (an exit of its own or a
    crash signal), which counts toward "crashed its worker" (docs/reliability.md)."""

    def __init__(self, message: str, crashed: bool = False) -> None:
        super().__init__(message)
        self.crashed = crashed


class TransactionLeftOpen(AlkQueueError):
    """A handler returned (or raised) with a transaction of its own still open on one of its
    thread's connections: an atomic block entered and never exited, or autocommit turned
    off. The worker rolled it back and restored the connection; the attempt fails with this
    error (docs/reliability.md)."""


class EventLoopDied(AlkQueueError):
    """The worker's event loop of async handlers ended while a handler's coroutine was on
    it: the error that attempt fails with; the next async job starts a new loop
    (docs/reliability.md). Never raised into your code."""
