"""OpenTelemetry (tracing.py): the enqueue's producer span, the W3C trace context stored in the
trace_context column, and the workers' consumer spans linked to it. This process's spans go
to the SDK's in-memory exporter; a worker subprocess writes its spans to a file
(testproject/otel.py) that the tests read back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from django_alkqueue import queue
from django_alkqueue.error_text import WITHHELD
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.shop import tasks
from tests.workers import ROOT, database_env, run_worker

pytestmark = pytest.mark.django_db(transaction=True)

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def tracer_provider() -> None:
    """The SDK in this process, once: OpenTelemetry allows one global provider."""
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def only(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in spans.get_finished_spans() if s.name == name]
    return span


def traceparent(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def worker_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- the enqueue --------------------------------------------------------------------------------


def test_enqueue_records_a_producer_span_with_the_queue_and_the_job_id(spans):
    job = queue("emails").enqueue({"to": "a@example.com"})

    span = only(spans, "enqueue emails")
    assert span.kind == trace.SpanKind.PRODUCER
    assert dict(span.attributes or {}) == {
        "messaging.system": "alkqueue",
        "messaging.destination.name": "emails",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.message.id": str(job.id),
    }


def test_the_enqueue_spans_w3c_context_is_stored_in_its_column_and_not_in_the_payload(spans):
    job = queue("emails").enqueue({"to": "a@example.com"})

    row = QueueMessage.objects.get(pk=job.id)
    assert json.loads(row.trace_context or "") == {
        "traceparent": traceparent(only(spans, "enqueue emails"))
    }
    assert row.payload == {"to": "a@example.com"}
    assert job.trace_context == row.trace_context


def test_an_enqueue_inside_a_request_span_is_its_child(spans):
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("POST /signup") as request:
        queue("emails").enqueue({})

    enqueue = only(spans, "enqueue emails")
    assert enqueue.parent is not None
    assert enqueue.parent.span_id == request.get_span_context().span_id


def test_enqueue_many_is_one_span_with_the_batch_count_and_every_row_gets_its_context(spans):
    jobs = queue("emails").enqueue_many([{"i": i} for i in range(3)])

    span = only(spans, "enqueue emails")
    assert (span.attributes or {})["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in (span.attributes or {})
    stored = QueueMessage.objects.filter(id__in=[j.id for j in jobs]).values_list(
        "trace_context", flat=True
    )
    assert [json.loads(c or "") for c in stored] == [{"traceparent": traceparent(span)}] * 3


def test_a_limited_queues_claim_hands_out_the_jobs_trace_context(spans):
    """A queue with flow-control limits claims through its own statements (the gate); its
    jobs carry their enqueue's context too, so the worker's span links to it."""
    from django_alkqueue.consumers import consumer, registry

    consumer("traced-limited", concurrency=2)(lambda payload, job: None)
    try:
        job = queue("traced-limited").enqueue({"n": 1})
        (handle,) = queue("traced-limited").claim("w", 5)
    finally:
        registry.unregister("traced-limited")

    assert job.trace_context is not None
    assert handle.job.trace_context == job.trace_context


def test_the_tasks_backend_enqueue_stores_the_trace_context(spans):
    result = tasks.echo.enqueue(1)

    span = only(spans, "enqueue default")
    row = QueueMessage.objects.get(pk=int(result.id))
    assert json.loads(row.trace_context or "") == {"traceparent": traceparent(span)}


def test_a_requeued_dead_letter_keeps_its_trace_context(spans):
    q = queue("emails", max_attempts=1)
    job = q.enqueue({})
    (claimed,) = q.claim("w1", 1)
    claimed.fail("broken")
    assert DeadLetter.objects.get(job_id=job.id).trace_context == job.trace_context

    again = q.requeue(job.id)

    assert again is not None and again.trace_context == job.trace_context
    assert QueueMessage.objects.get(pk=job.id).trace_context == job.trace_context


# -- the worker ---------------------------------------------------------------------------------


def test_the_worker_runs_each_job_in_a_consumer_span_linked_to_its_enqueue(spans, tmp_path):
    job = queue("shop-noop").enqueue({"n": 1})
    enqueue = only(spans, "enqueue shop-noop")
    exported = tmp_path / "spans.jsonl"

    run_worker("--queue", "shop-noop", "--burst", env={"ALKQUEUE_OTEL_SPANS": str(exported)})

    (run,) = [s for s in worker_spans(exported) if s["name"] == "process shop-noop"]
    assert run["kind"] == "SpanKind.CONSUMER"
    context = enqueue.get_span_context()
    assert run["context"]["trace_id"] == f"0x{context.trace_id:032x}"
    assert run["parent_id"] == f"0x{context.span_id:016x}"
    assert [link["context"]["span_id"] for link in run["links"]] == [f"0x{context.span_id:016x}"]
    assert run["attributes"] == {
        "messaging.system": "alkqueue",
        "messaging.destination.name": "shop-noop",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": str(job.id),
        "alkqueue.attempt": 1,
    }
    assert run["status"]["status_code"] == "UNSET"


def test_a_failing_handlers_span_records_the_exception_as_an_error(spans, tmp_path):
    queue("shop-emails").enqueue({"permanent": True})
    exported = tmp_path / "spans.jsonl"

    run_worker("--queue", "shop-emails", "--burst", env={"ALKQUEUE_OTEL_SPANS": str(exported)})

    (run,) = [s for s in worker_spans(exported) if s["name"] == "process shop-emails"]
    assert run["status"]["status_code"] == "ERROR"
    (event,) = run["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"].endswith("PermanentError")


SENSITIVE = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"}
CARD, EMAIL = "4111 1111 1111 1111", "jane@example.com"


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_sensitive_queues_span_records_the_exception_without_its_message(spans, tmp_path, pool):
    """The error store withholds a sensitive queue's exception messages (error_text.py); the
    span's exception event follows the same rule in either pool: the classes and the frames,
    not the messages (which here quote the card and the e-mail address)."""
    queue("private-cards").enqueue({"card": CARD, "email": EMAIL})
    exported = tmp_path / "spans.jsonl"

    run_worker("--queue", "private-cards", "--burst", "--pool", pool, "--concurrency", "1",
               env={**SENSITIVE, "ALKQUEUE_OTEL_SPANS": str(exported)})  # fmt: skip

    runs = [s for s in worker_spans(exported) if s["name"] == "process private-cards"]
    assert runs
    for run in runs:
        assert CARD not in json.dumps(run) and EMAIL not in json.dumps(run)
        assert run["status"]["status_code"] == "ERROR"
        (event,) = run["events"]
        assert event["name"] == "exception"
        assert event["attributes"]["exception.type"] == "ValueError"
        assert event["attributes"]["exception.message"] == WITHHELD
        assert f"LookupError {WITHHELD}" in event["attributes"]["exception.stacktrace"]


def test_a_sensitive_queues_span_keeps_the_reason_of_a_fail(spans, tmp_path):
    """Fail and Retry carry the reason the handler wrote for the record: the error text keeps
    it, and so does the span."""
    queue("private-fail").enqueue({"card": CARD})
    exported = tmp_path / "spans.jsonl"

    run_worker("--queue", "private-fail", "--burst",
               env={**SENSITIVE, "ALKQUEUE_OTEL_SPANS": str(exported)})  # fmt: skip

    (run,) = [s for s in worker_spans(exported) if s["name"] == "process private-fail"]
    (event,) = run["events"]
    assert event["attributes"]["exception.message"] == "card refused by the bank"
    assert CARD not in json.dumps(run)


def test_a_batch_consumers_call_is_one_span_linked_to_each_jobs_enqueue(spans, tmp_path):
    receipts = queue("shop-receipts")
    receipts.enqueue({"n": 1})
    receipts.enqueue({"n": 2})
    enqueued = {f"0x{s.context.span_id:016x}" for s in spans.get_finished_spans() if s.context}
    exported = tmp_path / "spans.jsonl"

    run_worker("--queue", "shop-receipts", "--burst", env={"ALKQUEUE_OTEL_SPANS": str(exported)})

    calls = [s for s in worker_spans(exported) if s["name"] == "process shop-receipts"]
    linked = {link["context"]["span_id"] for call in calls for link in call["links"]}
    assert linked == enqueued
    assert sum(call["attributes"]["messaging.batch.message_count"] for call in calls) == 2


# -- without the extra --------------------------------------------------------------------------

_WITHOUT_OTEL = """
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
import django
django.setup()
from django_alkqueue import queue, tracing
from django_alkqueue.models import QueueMessage
job = queue("emails").enqueue({"plain": True})
row = QueueMessage.objects.get(pk=job.id)
print(tracing.ENABLED, row.trace_context, row.payload)
"""


def test_without_the_otel_extra_enqueue_works_and_stores_no_trace_context():
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OTEL],
        cwd=ROOT,
        env=database_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False None {'plain': True}"


_WITHOUT_SDK = """
import django
django.setup()
from django_alkqueue import queue, tracing
from django_alkqueue.models import QueueMessage
job = queue("emails").enqueue({"plain": True})
print(tracing.ENABLED, tracing.active(), QueueMessage.objects.get(pk=job.id).trace_context)
"""


def test_with_the_api_but_no_sdk_configured_no_span_is_made_and_nothing_stored():
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SDK],
        cwd=ROOT,
        env=database_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True False None"
