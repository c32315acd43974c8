"""Scenario 4, network partition: one worker runs in its own network namespace and reaches
PostgreSQL over a veth pair. Mid-job its link is cut; its lease lapses and a worker on the
host takes the job over. When the link comes back, the cut-off worker's handler finishes and
its ack is refused: the row is still there, claimed under another claim token. The job is
acked once, by the worker that holds the claim."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage, Worker
from testproject.chaos.models import ExecutionLog, Gate

from .conftest import cluster_command
from .harness import Fleet, serving, wait_for
from .invariants import Fault, check
from .netns import Link, partitionable_link
from .record import Stopwatch, record
from .scale import pick

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.serial,
    pytest.mark.django_db(transaction=True),
]

QUEUE = "chaos-partition"  # lease 2 s, 5 attempts
BACKGROUND = pick(short=200, long=3_000)
HANDLER_MS = (10, 60)
THREADS = 4
#: Seconds the link stays down after the other worker took the job over.
EXTRA_OUTAGE = pick(short=1.0, long=10.0)
SETTLE = 10.0
CUT_OFF, HEALTHY = "partitioned", "healthy"


@pytest.fixture
def link() -> Iterator[Link]:
    with partitionable_link(cluster_command("restart")) as created:
        yield created


def runs(job_id: int) -> list[tuple[int, str, str]]:
    return list(
        ExecutionLog.objects.filter(job_id=job_id)
        .order_by("id")
        .values_list("attempt", "worker_id", "outcome")
    )


def test_cut_off_worker_loses_its_claim_and_its_late_ack_is_refused(fleet: Fleet, link: Link):
    clock = Stopwatch()
    cut_off = fleet.start(
        *serving(QUEUE, threads=THREADS),
        worker_id=CUT_OFF,
        prefix=link.prefix(),
        env={"DATABASE_URL": database_url(link.host_address)},
    )
    wait_for(
        lambda: Worker.objects.filter(worker_id=CUT_OFF).exists(),
        timeout=30,
        what="the namespaced worker registering over the veth link",
    )
    # Attempt 1 (cut-off worker) waits until the link is back; attempt 2 (the healthy worker)
    # waits until the test has seen attempt 1's ack refused.
    job = queue(QUEUE, priority=10).enqueue(
        {"hold": {"1": ["link restored", 120], "2": ["stale ack refused", 120]}}
    )
    wait_for(
        lambda: runs(job.id) == [(1, CUT_OFF, "")],
        timeout=30,
        what="attempt 1 on the namespaced worker",
    )
    fleet.start(*serving(QUEUE, threads=THREADS), worker_id=HEALTHY)
    wait_for(
        lambda: Worker.objects.filter(worker_id=HEALTHY).exists(),
        timeout=30,
        what="the healthy worker registering",
    )
    rng = random.Random(4)
    background = queue(QUEUE).enqueue_many(
        [{"i": i, "ms": round(rng.uniform(*HANDLER_MS), 1)} for i in range(BACKGROUND)]
    )
    wait_for(
        lambda: ExecutionLog.objects.filter(worker_id=CUT_OFF).count() > THREADS,
        timeout=30,
        what="the namespaced worker running background jobs",
    )

    cut_at = timezone.now()
    link.cut()
    wait_for(
        lambda: (2, HEALTHY, "") in runs(job.id),
        timeout=30,
        what="the healthy worker taking over the job after its lease lapsed",
    )
    held = QueueMessage.objects.get(pk=job.id)
    time.sleep(EXTRA_OUTAGE)  # the outage itself: nothing to wait for
    link.restore()
    restored_at = timezone.now()
    Gate.objects.create(name="link restored")

    line = f"{QUEUE} job {job.id}: claim lost"
    wait_for(
        lambda: line in cut_off.output,
        timeout=60,
        what="the namespaced worker's ack of attempt 1 refused",
    )
    after_refusal = QueueMessage.objects.get(pk=job.id)
    Gate.objects.create(name="stale ack refused")
    wait_for(
        lambda: not QueueMessage.objects.filter(queue=QUEUE).exists(),
        timeout=120,
        what="drain of the job and the background jobs",
    )
    cut_off_alive = cut_off.alive()
    codes = fleet.stop_all()

    faults = [Fault("network partition", cut_at, restored_at, frozenset({CUT_OFF})).settled(SETTLE)]
    ids = [job.id, *(j.id for j in background)]
    report = check(ids, faults, expect=dict.fromkeys(ids, "acked"))
    record(
        4,
        "Network partition",
        f"a worker in its own network namespace is cut off (veth link down) mid-job for "
        f"its 2 s lease plus {EXTRA_OUTAGE:g} s while {BACKGROUND:,} other jobs flow; a "
        "worker on the host takes its jobs over; the link is restored",
        report,
        clock.seconds(),
        {
            "outage_seconds": round((restored_at - cut_at).total_seconds(), 1),
            "refused_late_acks": cut_off.output.count("claim lost"),
        },
    )
    output = fleet.outputs()
    assert report.ok, report.summary() + output
    # The takeover: a new claim (token) and attempt 2 on the healthy worker.
    assert (held.claimed_by, held.attempts) == (HEALTHY, 2)
    # The late ack was refused by the claim token: the row outlived it, untouched.
    assert (after_refusal.claim_token, after_refusal.claimed_by) == (held.claim_token, HEALTHY)
    assert runs(job.id) == [(1, CUT_OFF, "completed"), (2, HEALTHY, "completed")]
    assert report.figures.acked == len(ids) and report.figures.double_acks == 0
    assert cut_off_alive, output
    assert set(codes.values()) == {0}, output


def database_url(host: str) -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"
