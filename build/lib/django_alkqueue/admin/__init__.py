"""The operator's pages: the queue overview and detail, live jobs, dead letters, consumers and
workers. One module per page; docs/admin.md describes them and the runbook."""

from django.contrib import admin

from ..models import Consumer, DeadLetter, QueueMessage, QueueStat, Worker
from .consumers import ConsumerAdmin
from .dead_letters import DeadLetterAdmin
from .messages import QueueMessageAdmin
from .overview import QueueStatAdmin
from .workers import WorkerAdmin

admin.site.register(QueueStat, QueueStatAdmin)
admin.site.register(QueueMessage, QueueMessageAdmin)
admin.site.register(DeadLetter, DeadLetterAdmin)
admin.site.register(Consumer, ConsumerAdmin)
admin.site.register(Worker, WorkerAdmin)

__all__ = ["ConsumerAdmin", "DeadLetterAdmin", "QueueMessageAdmin", "QueueStatAdmin", "WorkerAdmin"]
