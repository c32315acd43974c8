"""The @consumer decorator and the registry of handlers, one per queue.

Handlers are found by importing `consumers.py` of every installed app (and the modules in
ALKQUEUE["CONSUMER_MODULES"]) when the app is ready, so web processes and workers share one
registry. A second consumer for a queue is an error that names both handlers.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import module_has_submodule

from . import limit_values as flow
from . import validation
from .backoff import RetryPolicy
from .exceptions import InvalidOption


@dataclasses.dataclass(frozen=True)
class ConsumerSpec:
    queue: str
    #: `handler(payload, job)`; with `batch`, `handler(jobs)`: the jobs of one call in handout
    #: order, returning None (all succeeded) or a mapping of job id to the exception it failed
    #: with.
    handler: Callable[..., Any]
    path: str
    lease: float | None
    max_attempts: int | None
    retry: RetryPolicy
    atomic: bool
    #: A batch consumer's most jobs per call; None for a plain handler(payload, job).
    batch: int | None = None
    #: The payloads carry personal data: masked in the admin for users without
    #: `view_payload`, never logged nor quoted in error texts (docs/security.md).
    sensitive: bool = False
    #: The queue's flow control (docs/flow-control.md); no limits by default.
    limits: flow.Limits = flow.NO_LIMITS
    #: Seconds a handler call may run before its attempt fails with TimeLimitExceeded
    #: (docs/running-jobs.md); None: no limit.
    timeout: float | None = None
    #: Seconds each finished job is kept in the history (docs/running-jobs.md); None: none.
    keep: float | None = None

    def queue_defaults(self) -> dict[str, Any]:
        """The stamps this consumer gives jobs enqueued on its queue."""
        defaults: dict[str, Any] = {}
        if self.lease is not None:
            defaults["lease"] = self.lease
        if self.max_attempts is not None:
            defaults["max_attempts"] = self.max_attempts
        if self.retry.base is not None:
            defaults["backoff_base"] = self.retry.base
        return defaults


def handler_path(handler: Callable[..., Any]) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"


def code_location(handler: Callable[..., Any]) -> tuple[str, int] | None:
    """Where the handler's code is defined (file, first line); None for a callable without
    code of its own (a functools.partial, an object with __call__)."""
    code = getattr(inspect.unwrap(handler), "__code__", None)
    return None if code is None else (code.co_filename, code.co_firstlineno)


def same_handler(existing: ConsumerSpec, new: ConsumerSpec) -> bool:
    """One handler registered again: the same function object, or the same function
    re-created by a re-import of its module (same dotted path and same code location).
    A dotted path alone is not enough: `def handler` twice in one module, or two handlers
    nested in one function, share a path and are still two consumers."""
    if existing.handler is new.handler:
        return True
    location = code_location(new.handler)
    return (
        existing.path == new.path
        and location is not None
        and location == code_location(existing.handler)
    )


def _with_location(spec: ConsumerSpec) -> str:
    location = code_location(spec.handler)
    return spec.path if location is None else f"{spec.path} ({location[0]}:{location[1]})"


class ConsumerRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, ConsumerSpec] = {}
        #: Errors met while discovering handlers; reported by the system check alkqueue.E001.
        self.errors: list[str] = []

    def register(self, spec: ConsumerSpec) -> None:
        existing = self._specs.get(spec.queue)
        if existing is not None and not same_handler(existing, spec):
            first, second = existing.path, spec.path
            if first == second:  # name them apart by where they are defined
                first, second = _with_location(existing), _with_location(spec)
            raise ImproperlyConfigured(
                f"queue {spec.queue!r} has two consumers: {first} and {second}; "
                "a queue has exactly one consumer"
            )
        self._specs[spec.queue] = spec

    def get(self, queue: str) -> ConsumerSpec | None:
        return self._specs.get(queue)

    def all(self) -> list[ConsumerSpec]:
        return sorted(self._specs.values(), key=lambda s: s.queue)

    def unregister(self, queue: str) -> None:
        self._specs.pop(queue, None)

    def autodiscover(self, extra_modules: tuple[str, ...] = ()) -> None:
        """Import every app's consumers.py and the extra modules; record errors, don't raise.

        Each module is imported on its own, so one app's duplicate does not hide the
        consumers of the apps after it.
        """
        modules = [
            f"{config.name}.consumers"
            for config in apps.get_app_configs()
            if module_has_submodule(config.module, "consumers")
        ]
        for module in [*modules, *extra_modules]:
            try:
                importlib.import_module(module)
            except ImproperlyConfigured as exc:
                self.errors.append(str(exc))


registry = ConsumerRegistry()


def consumer(
    queue: str,
    *,
    lease: float | timedelta | None = None,
    max_attempts: int | None = None,
    retry: RetryPolicy | None = None,
    atomic: bool = False,
    batch: int | None = None,
    sensitive: bool = False,
    concurrency: int | None = None,
    key_concurrency: int | None = None,
    rate: str | tuple[int, timedelta] | None = None,
    key_rate: str | tuple[int, timedelta] | None = None,
    timeout: float | timedelta | None = None,
    keep: float | timedelta | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Bind the decorated `handler(payload, job)` to `queue`. Options become the queue's stamps.

    With `batch`, the handler is `handler(jobs)` instead: a list of up to `batch` jobs of one
    claim per call (docs/consumers.md).

    `concurrency`, `key_concurrency`, `rate` and `key_rate` limit the queue's claims across
    every worker (docs/flow-control.md). `timeout` bounds each handler call: past it the
    attempt fails with TimeLimitExceeded (docs/running-jobs.md). `keep` keeps each finished
    job, with its handler's return value, for that long (docs/running-jobs.md, "History
    and recorded output")."""
    validation.queue_name(queue)
    size = None if batch is None else validation.consumer_batch(batch)
    if size is not None and atomic:
        raise InvalidOption("batch and atomic cannot be combined: an atomic consumer runs one "
                            "job per transaction")  # fmt: skip
    lease_seconds = None if lease is None else validation.seconds(lease, "lease", positive=True)
    limit = None if timeout is None else validation.seconds(timeout, "timeout", positive=True)
    attempts = None if max_attempts is None else validation.max_attempts(max_attempts)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise InvalidOption(f"retry must be a RetryPolicy, not {type(retry).__name__}")
    if not isinstance(atomic, bool):
        raise InvalidOption(f"atomic must be True or False, not {validation.shown(atomic, repr)}")
    if not isinstance(sensitive, bool):
        shown = validation.shown(sensitive, repr)
        raise InvalidOption(f"sensitive must be True or False, not {shown}")
    kept = None if keep is None else validation.seconds(keep, "keep", positive=True)
    limits = flow.limits(
        concurrency=concurrency, key_concurrency=key_concurrency, rate=rate, key_rate=key_rate
    )

    def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
        if atomic and inspect.iscoroutinefunction(handler):
            raise InvalidOption(
                f"queue {queue!r}: an async handler cannot be atomic: its transaction would "
                "span the worker's event loop; open one with sync_to_async in the handler"
            )
        registry.register(
            ConsumerSpec(
                queue=queue,
                handler=handler,
                path=handler_path(handler),
                lease=lease_seconds,
                max_attempts=attempts,
                retry=retry or RetryPolicy(),
                atomic=atomic,
                batch=size,
                sensitive=sensitive,
                limits=limits,
                timeout=limit,
                keep=kept,
            )
        )
        return handler

    return decorate
