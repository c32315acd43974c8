"""OpenTelemetry for the tests' worker subprocesses: with ALKQUEUE_OTEL_SPANS=PATH in their
environment, every span they finish is appended to PATH as one JSON line (the SDK's own
ReadableSpan.to_json), which tests/test_traces.py reads back."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(json.loads(span.to_json())) + "\n" for span in spans)
        with self.lock, open(self.path, "a") as file:
            file.write(lines)
        return SpanExportResult.SUCCESS


def export_spans_to(path: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)
