import os

from django.apps import AppConfig

#: Comma-separated queues whose leases the worker must not heartbeat (scenario 6:
#: a handler that blocks past its lease with no heartbeat). Set only in worker subprocesses.
NO_HEARTBEATS_ENV = "ALKQUEUE_CHAOS_NO_HEARTBEATS"


class ChaosConfig(AppConfig):
    name = "testproject.chaos"
    label = "chaos"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import faults, receivers

        receivers.connect()
        queues = {q for q in os.environ.get(NO_HEARTBEATS_ENV, "").split(",") if q}
        if queues:
            faults.stop_heartbeats_for(queues)
