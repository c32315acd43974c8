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


class TimeLimitExceeded(AlkQueueError):
    """A handler ran past its consumer's `timeout`: the error its attempt fails with
    (docs/running-jobs.md). The worker records it; handlers never need to raise it."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"ran longer than {timeout:g} s")
        self.timeout = timeout


class WorkerChildDied(AlkQueueError):
    """A process-pool child ended while it ran a job (killed by a signal from outside, a
    segfault, os._exit): the error that attempt fails with (docs/running-jobs.md)."""
