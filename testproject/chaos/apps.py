import os

from django.apps import AppConfig

#: Comma-separated queues whose leases the worker's lease keeper must not renew (scenario 6:
#: a handler that blocks past its lease with no heartbeat). Set only in worker subprocesses.
NO_LEASE_KEEPER_ENV = "ALKQUEUE_CHAOS_NO_LEASE_KEEPER"


class ChaosConfig(AppConfig):
    name = "testproject.chaos"
    label = "chaos"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import faults, receivers

        receivers.connect()
        queues = {q for q in os.environ.get(NO_LEASE_KEEPER_ENV, "").split(",") if q}
        if queues:
            faults.stop_lease_keeper_for(queues)
