"""The consumers a worker serves: each named queue's @consumer, or the Tasks backend's runner
for a task queue; a worker with none refuses to start and says where it looked."""

from __future__ import annotations

from django.apps import apps

from .. import task_queues
from ..conf import get_settings
from ..consumers import ConsumerSpec, registry
from .exits import StartupRefused


def no_consumers_message() -> str:
    """What a worker with nothing to serve says: where it looked, and how to add a consumer."""
    looked = [f"{config.name}.consumers" for config in apps.get_app_configs()]
    extra = list(get_settings().CONSUMER_MODULES)
    return (
        "no @consumer is registered and no task queue is declared. Looked for consumers in "
        f"the consumers module of each installed app ({', '.join(looked)})"
        + (f" and in ALKQUEUE['CONSUMER_MODULES'] ({', '.join(extra)})" if extra else "")
        + ". Add one in yourapp/consumers.py: `from django_alkqueue import consumer`, then "
        '`@consumer("emails")` on a function `def send(payload, job): ...` '
        "(docs/consumers.md), or configure the Tasks backend's QUEUES (docs/tasks.md)"
    )


def resolve_specs(names: tuple[str, ...]) -> list[ConsumerSpec]:
    """The consumers this worker serves: the named queues, or every @consumer queue and every
    queue an alkqueue task backend declares. Task queues get the built-in task consumer."""
    if registry.errors:
        raise StartupRefused("; ".join(registry.errors))
    declared = task_queues.declared()
    mixed = [name for name in declared if registry.get(name) is not None]
    if mixed:
        raise StartupRefused(
            f"queue(s) {', '.join(mixed)} have a @consumer and are also task queues in "
            "TASKS QUEUES; a queue is one or the other"
        )
    if not names:
        names = tuple(s.queue for s in registry.all()) + tuple(declared)
        if not names:
            raise StartupRefused(no_consumers_message())
    specs = {n: registry.get(n) or task_queues.spec(n) for n in dict.fromkeys(names)}
    missing = [n for n, spec in specs.items() if spec is None]
    if missing:
        raise StartupRefused(f"no @consumer or task backend for queue(s) {', '.join(missing)}")
    return [spec for spec in specs.values() if spec is not None]
