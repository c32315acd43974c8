"""The operator's pages: the queue overview and detail, live jobs, dead letters, finished jobs
(the kept history), consumers,
workers and periodic schedules. One module per page; docs/admin.md describes them and the
runbook."""

from django.contrib import admin

from ..models import (
    Consumer,
    DeadLetter,
    FinishedJob,
    PeriodicTick,
    QueueMessage,
    QueueStat,
    Worker,
)
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

__all__ = [
    "ConsumerAdmin",
    "DeadLetterAdmin",
    "FinishedJobAdmin",
    "PeriodicScheduleAdmin",
    "QueueMessageAdmin",
    "QueueStatAdmin",
    "WorkerAdmin",
]
