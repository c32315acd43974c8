"""The operator's pages: the queue overview and detail, live jobs, dead letters, finished jobs
(the history), batches, consumers,
workers and periodic schedules. One module per page; docs/admin.md describes them and the
runbook."""

from django.contrib import admin

from ..models import (
    Batch,
    Consumer,
    DeadLetter,
    FinishedJob,
    PeriodicTick,
    QueueMessage,
    QueueStat,
    Worker,
)
from .batches import BatchAdmin
from .consumers import ConsumerAdmin
from .dead_letters import DeadLetterAdmin
from .finished_jobs import FinishedJobAdmin
from .jobs import QueueMessageAdmin
from .overview import QueueStatAdmin
from .periodic import PeriodicScheduleAdmin
from .workers import WorkerAdmin

admin.site.register(QueueStat, QueueStatAdmin)
admin.site.register(QueueMessage, QueueMessageAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(FinishedJob, FinishedJobAdmin)
admin.site.register(Consumer, ConsumerAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(PeriodicTick, PeriodicScheduleAdmin)
admin.site.register(Batch, BatchAdmin)

__all__ = [
    "BatchAdmin",
    "ConsumerAdmin",
    "DeadLetterAdmin",
    "FinishedJobAdmin",
    "PeriodicScheduleAdmin",
    "QueueMessageAdmin",
    "QueueStatAdmin",
    "WorkerAdmin",
]
