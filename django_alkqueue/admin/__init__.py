"""The operator's pages: the queue overview and detail, live jobs, dead letters, consumers,
workers and periodic schedules. One module per page; docs/admin.md describes them and the
runbook."""

from django.contrib import admin

from ..models import Consumer, DeadLetter, PeriodicTick, QueueMessage, QueueStat, Worker
from .consumers import ConsumerAdmin
from .dead_letters import DeadLetterAdmin
from .jobs import QueueMessageAdmin
from .overview import QueueStatAdmin
from .periodic import PeriodicScheduleAdmin
from .workers import WorkerAdmin

admin.site.register(QueueStat, QueueStatAdmin)
admin.site.register(QueueMessage, QueueMessageAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(Consumer, ConsumerAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(PeriodicTick, PeriodicScheduleAdmin)

__all__ = [
    "ConsumerAdmin",
    "DeadLetterAdmin",
    "PeriodicScheduleAdmin",
    "QueueMessageAdmin",
    "QueueStatAdmin",
    "WorkerAdmin",
]
