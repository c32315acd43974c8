"""Consumers that keep history, for tests/test_history.py: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.keeping_consumers, and by the in-process tests on import.

"keeping" fails its first `fail_first` attempts, then returns `value`, or with
{"output": "big"} a string over MAX_OUTPUT_BYTES, with {"output": "object"} a value that
is not JSON, with {"output": NAME} one of the ODD_OUTPUTS the history cannot store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django_alkqueue import Job, RetryPolicy, consumer
from testproject.shop.models import HandlerRun

NO_WAIT = RetryPolicy(backoff="constant", base=0)


class BrokenMapping(dict[str, Any]):
    """A dict whose items cannot be listed: the JSON encoder's call of items() raises."""

    def items(self) -> Any:
        raise RuntimeError("no items for \udcff\x00")  # the note quotes it: made storable


def _circular() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _deep() -> list[Any]:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    return value


#: Handler outputs the history's encoder refuses, by name: each must leave a note, not fail
#: the ack.
ODD_OUTPUTS = {
    "surrogate": lambda: "file-\udcff.txt",
    "surrogate-key": lambda: {"\ud800": 1},
    "nested-surrogate": lambda: {"names": ["ok", "bad \udfff"]},
    "huge-int": lambda: 10**5000,
    "nan": lambda: float("nan"),
    "inf": lambda: [float("inf")],
    "circular": _circular,
    "deep": _deep,
    "broken-mapping": lambda: BrokenMapping(a=1),
    "bytes": lambda: b"\x00\xff",
}


@consumer("keeping", keep=timedelta(days=2), max_attempts=3, retry=NO_WAIT)
def keep_and_return(payload: dict[str, Any], job: Job) -> Any:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts)
    if job.attempts <= payload.get("fail_first", 0):
        raise ConnectionError(f"attempt {job.attempts} fails")
    if payload.get("output") == "big":
        return "x" * 40_000
    if payload.get("output") == "object":
        return object()
    if payload.get("output") in ODD_OUTPUTS:
        return ODD_OUTPUTS[payload["output"]]()
    return payload.get("value")


@consumer("keeping-atomic", keep=3600, atomic=True)
def keep_atomically(payload: dict[str, Any], job: Job) -> Any:
    return {"done": job.id}


@consumer("keeping-batch", keep=3600, batch=10)
def keep_a_batch(jobs: list[Job]) -> None:
    return None


@consumer("not-keeping")
def keep_nothing(payload: dict[str, Any], job: Job) -> Any:
    return {"ignored": True}
