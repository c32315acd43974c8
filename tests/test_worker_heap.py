"""A worker process leaves its start-up heap out of the garbage collector's passes
(alk_worker's freeze_startup_heap): the objects made before the first job are frozen.

The worker subprocess imports this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); its handler records what the collector holds frozen.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest

from django_alkqueue import Job, consumer, queue
from testproject.shop.models import HandlerRun
from tests.workers import run_worker

QUEUE = "worker-heap"
CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}


def frozen_objects(payload: Any, job: Job) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              worker=str(gc.get_freeze_count()))  # fmt: skip


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(QUEUE)(frozen_objects)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_process_runs_its_jobs_with_the_start_up_heap_frozen(processes):
    job = queue(QUEUE).enqueue({"n": 1})

    run_worker("--queue", QUEUE, "--processes", processes, "--burst", env=CONSUMERS, timeout=60)

    run = HandlerRun.objects.get(job_id=job.id)
    # Django and the apps alone are tens of thousands of objects.
    assert int(run.worker) > 10_000
