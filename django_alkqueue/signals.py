"""Django signals sent as jobs change state. Each is sent with `sender=Job` and `job=<Job>`.

`job_enqueued` and `job_dead_lettered` are sent by the core operations, whoever calls them;
`job_started`, `job_succeeded` and `job_retried` by the worker around each handler run.
"""

from django.dispatch import Signal

job_enqueued = Signal()
job_started = Signal()
job_succeeded = Signal()
job_retried = Signal()
job_dead_lettered = Signal()
