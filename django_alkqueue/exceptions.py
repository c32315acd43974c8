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
