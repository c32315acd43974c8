"""Scenario 7, payload size limit (PostgreSQL and SQLite): a payload whose compact JSON
encoding is exactly ALKQUEUE["MAX_PAYLOAD_BYTES"] bytes is accepted and comes back exactly
(through get_job, and through a real worker's handler); one byte more is refused with
PayloadError and nothing is written, alone or inside an enqueue_many batch.

The size is len(json.dumps(p, separators=(",", ":"), ensure_ascii=False).encode()): bytes,
not characters, counted after escaping. The payloads mix 1-, 2- and 4-byte characters and
characters JSON escapes (a quote: 2 bytes; NUL: 6 bytes as \\u0000) to pin that down."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from django_alkqueue import PayloadError, queue
from django_alkqueue.conf import get_settings
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.chaos.consumers import digest
from testproject.chaos.models import AckLog, ExecutionLog

from .harness import Fleet
from .invariants import check
from .record import Stopwatch, record
from .scale import LONG

pytestmark = pytest.mark.django_db(transaction=True)

ECHO = "chaos-echo"
#: Character mixes: each fills the blob up to the limit, then single ASCII bytes pad it.
MIXES = {
    "ascii": "a",
    "multibyte": "aé€😀",  # 1 + 2 + 3 + 4 bytes
    "escaped": 'a"\\\n\x00é',  # 1 + 2 + 2 + 2 + 6 + 2 bytes once encoded
}


def encoded_size(payload: Any) -> int:
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def payload_of_size(size: int, mix: str) -> dict[str, str]:
    """{"blob": ...} whose encoding is exactly `size` bytes."""
    empty = encoded_size({"blob": ""})
    unit = encoded_size({"blob": mix}) - empty
    body = mix * max((size - empty - 8) // unit, 0)
    body += "a" * (size - encoded_size({"blob": body}))
    payload = {"blob": body}
    assert encoded_size(payload) == size
    return payload


def counts() -> tuple[int, int]:
    return QueueMessage.objects.count(), DeadLetter.objects.count()


def max_allowed_packet() -> int:
    """The largest statement MySQL and MariaDB accept, for new connections."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.max_allowed_packet")
        return int(cursor.fetchone()[0])


def limit() -> int:
    return get_settings().MAX_PAYLOAD_BYTES


@pytest.mark.parametrize("mix", MIXES)
def test_payload_at_the_limit_is_accepted_and_round_trips_exactly(mix: str):
    payload = payload_of_size(limit(), MIXES[mix])

    job = queue(ECHO).enqueue(payload)

    stored = queue(ECHO).get_job(job.id)
    assert stored is not None and stored.payload == payload
    assert digest(stored.payload) == digest(payload)


@pytest.mark.parametrize("mix", MIXES)
def test_payload_one_byte_over_the_limit_is_refused_and_writes_nothing(mix: str):
    before = counts()
    over = payload_of_size(limit() + 1, MIXES[mix])

    with pytest.raises(PayloadError, match=str(limit())):
        queue(ECHO).enqueue(over)
    with pytest.raises(PayloadError, match=r"payloads\[2\]"):
        queue(ECHO).enqueue_many([{"n": 1}, payload_of_size(limit(), MIXES[mix]), over])

    assert counts() == before


@pytest.mark.skipif(not LONG, reason="the long version (make chaos) also tries a 16 MiB limit")
@override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": 16 * 1024 * 1024})
def test_a_raised_limit_of_16_mib_holds_to_the_byte():
    if connection.vendor == "mysql" and max_allowed_packet() <= 2 * limit():
        pytest.skip("MySQL's max_allowed_packet is too small for 16 MiB payloads (make mariadb)")
    before = counts()
    payload = payload_of_size(limit(), MIXES["multibyte"])

    job = queue(ECHO).enqueue(payload)
    with pytest.raises(PayloadError):
        queue(ECHO).enqueue(payload_of_size(limit() + 1, MIXES["multibyte"]))

    stored = queue(ECHO).get_job(job.id)
    assert stored is not None and digest(stored.payload) == digest(payload)
    assert counts() == (before[0] + 1, before[1])


def test_payloads_at_the_limit_reach_the_handler_exactly_and_one_byte_over_never_does(
    fleet: Fleet,
):
    clock = Stopwatch()
    at_limit = {mix: payload_of_size(limit(), chars) for mix, chars in MIXES.items()}
    refused = 0
    for chars in MIXES.values():
        try:
            queue(ECHO).enqueue(payload_of_size(limit() + 1, chars))
        except PayloadError:
            refused += 1
    jobs = {mix: queue(ECHO).enqueue(payload) for mix, payload in at_limit.items()}

    worker = fleet.start("--queue", ECHO, "--burst", "-v", "0")
    code = worker.process.wait(120)

    report = check(
        [j.id for j in jobs.values()], expect=dict.fromkeys((j.id for j in jobs.values()), "acked")
    )
    received = dict(ExecutionLog.objects.values_list("job_id", "note"))
    for mix, job in jobs.items():
        if received.get(job.id) != digest(at_limit[mix]):
            report.problems.append(f"{mix}: the handler received a different payload")
    if refused != len(MIXES):
        report.problems.append(f"only {refused} of {len(MIXES)} over-limit payloads refused")
    report.figures.faults = refused
    record(
        7,
        "Payload size limit",
        f"{len(MIXES)} payloads of exactly {limit():,} bytes (ASCII, multi-byte, escaped) "
        "enqueued and run by a worker; the same plus one byte refused",
        report,
        clock.seconds(),
        {"limit_bytes": limit(), "refused": refused},
    )
    assert code == 0, worker.output
    assert report.ok, report.summary() + worker.output
    assert QueueMessage.objects.count() == 0 and AckLog.objects.count() == len(MIXES)
