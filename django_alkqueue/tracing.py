"""OpenTelemetry spans, with the `otel` extra (docs/operations.md, "Traces"): a producer span
around each enqueue and a consumer span around each handler call, linked through the W3C
trace context the enqueue stores in the job's `trace_context` column.

The import is tried once, here; `ENABLED` is the one check the enqueue and the executor make,
so without the extra nothing else of this module runs. With the API but no SDK configured
(`active()` is false) no span is made and no context is stored.

Attributes follow OpenTelemetry's messaging semantic conventions: `messaging.system`,
`messaging.destination.name`, `messaging.operation.type` (send, process),
`messaging.operation.name` (our verbs), `messaging.message.id`, and
`messaging.batch.message_count` for enqueue_many and batch consumers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .error_text import private_message
from .jobs import Job
from .outcomes import Snooze
from .steps import Suspended

try:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the `otel` extra is not installed
    ENABLED = False
else:
    ENABLED = True
    _PROPAGATOR = TraceContextTextMapPropagator()
    _TRACER = trace.get_tracer("django_alkqueue")
    _NO_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def active() -> bool:
    """Whether a tracer provider is configured (an SDK): until then OpenTelemetry's spans are
    no-ops, and making them would cost an enqueue more than its write (docs/benchmarks.md)."""
    return not isinstance(trace.get_tracer_provider(), _NO_PROVIDERS)


#: The value of `messaging.system` on every span.
SYSTEM = "alkqueue"


def _attributes(queue: str, operation: str, kind: str, ids: Sequence[int]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": kind,
        "messaging.operation.name": operation,
    }
    if len(ids) == 1:
        attributes["messaging.message.id"] = str(ids[0])
    return attributes


class EnqueueSpan:
    """The span of one enqueue call while it writes: its W3C trace context, as stored."""

    def __init__(self, span: Span) -> None:
        self.span = span
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        #: None when no SDK records (the no-op span has no valid context to pass on).
        self.trace_context = json.dumps(carrier, separators=(",", ":")) if carrier else None

    def written(self, jobs: Sequence[Job]) -> None:
        """Name the job the call wrote (one job; a batch has its count instead)."""
        if len(jobs) == 1 and self.span.is_recording():
            self.span.set_attribute("messaging.message.id", str(jobs[0].id))


@contextmanager
def enqueue_span(queue: str, count: int) -> Iterator[EnqueueSpan]:
    """A producer span "enqueue QUEUE" around the write of `count` jobs."""
    attributes = _attributes(queue, "enqueue", "send", ())
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with _TRACER.start_as_current_span(
        f"enqueue {queue}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield EnqueueSpan(span)


def linked_context(job: Job) -> Any:
    """The span context stored with `job` by its enqueue, or None (untraced, unreadable)."""
    if not job.trace_context:
        return None
    try:
        carrier = json.loads(job.trace_context)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    context = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return context if context.is_valid else None


#: The private error text of an exception (error_text.py), for a sensitive queue's span.
PrivateText = Callable[[BaseException], str]


@contextmanager
def process_span(
    queue: str, jobs: Sequence[Job], batch: bool = False, private: PrivateText | None = None
) -> Iterator[None]:
    """A consumer span "process QUEUE" around one handler call, linked to each job's enqueue
    span; for a plain consumer's job, that span is also its parent, so the run shows under the
    request that enqueued it. A batch consumer's call has the batch's size instead of a job id.
    An exception the handler raises is recorded (a Snooze is not an error): for a sensitive
    queue, `private` gives the text its event carries instead of the message and stack trace,
    as the error store does."""
    contexts = [c for c in map(linked_context, jobs) if c is not None]
    ids = [] if batch else [job.id for job in jobs]
    attributes = _attributes(queue, "process", "process", ids)
    if batch:
        attributes["messaging.batch.message_count"] = len(jobs)
    else:
        attributes["alkqueue.attempt"] = jobs[0].attempts
    parent = None
    if not batch and contexts:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(contexts[0]))
    with _TRACER.start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=[trace.Link(context) for context in contexts],
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except Snooze:
            span.set_attribute("alkqueue.outcome", "snoozed")
            raise
        except Suspended:  # job.sleep, job.wait_for: the job sleeps or waits, no error
            span.set_attribute("alkqueue.outcome", "suspended")
            raise
        except BaseException as error:
            _record(span, error, private)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
            raise


def _record(span: Span, error: BaseException, private: PrivateText | None) -> None:
    """The span's "exception" event: OpenTelemetry's own, or for a sensitive queue one with
    the same attributes whose message and stack trace are the private error text's."""
    if private is None:
        span.record_exception(error)
        return
    module, name = type(error).__module__, type(error).__qualname__
    span.add_event(
        "exception",
        {
            "exception.type": f"{module}.{name}" if module != "builtins" else name,
            "exception.message": private_message(error),
            "exception.stacktrace": private(error),
            "exception.escaped": "False",
        },
    )
