"""django-alkqueue: the bench queue's consumer. With BENCH_CONSUMER_BATCH set, the worker's
consumer is a batch consumer taking that many jobs per call (the configuration comparable to
django-vtasks' batching option); otherwise one job per call."""

import os
from typing import Any

from django_alkqueue import Job, consumer

from . import noop

BATCH = int(os.environ.get("BENCH_CONSUMER_BATCH", "0")) or None

if BATCH is None:

    @consumer("bench")
    def run(payload: Any, job: Job) -> None:
        noop(payload)

else:

    @consumer("bench", batch=BATCH)
    def run_batch(jobs: list[Job]) -> None:
        for job in jobs:
            noop(job.payload)
