"""Limits changed while workers run (issue 34, rule 6), with a real worker: the override
applies within a poll interval, and wins over the code's limit across a worker restart.
shop-throttled's @consumer declares concurrency=1."""

from __future__ import annotations

import signal
import time

import pytest

from django_alkqueue import operations, queue
from django_alkqueue.limits import REFRESH_EVERY
from django_alkqueue.models import Consumer, QueueMessage
from tests.conftest import wait_until
from tests.test_worker_command import workers  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "shop-throttled"
POLL = 1.0  # the default poll interval
#: A claim sees a changed limit at its next full look (one poll interval) once the worker's
#: limits cache has been read again (REFRESH_EVERY); the rest is process scheduling.
APPLIES_WITHIN = POLL + REFRESH_EVERY + 1.5


def claimed() -> int:
    return QueueMessage.objects.filter(queue=QUEUE, claim_token__isnull=False).count()


def start(workers):  # noqa: F811
    return workers("--queue", QUEUE, "--concurrency", "4", "--poll-interval", str(POLL),
                   "--shutdown-timeout", "0")  # fmt: skip


def test_a_worker_applies_a_changed_limit_within_a_poll_interval(workers):  # noqa: F811
    queue(QUEUE).enqueue_many([{"sleep": 30}] * 8)
    worker = start(workers)
    wait_until(lambda: claimed() == 1, timeout=20, what=f"the code's cap:\n{worker.output}")

    operations.set_limits(QUEUE, concurrency=3)
    changed_at = time.monotonic()
    wait_until(lambda: claimed() == 3, timeout=20, what=f"the new cap:\n{worker.output}")

    assert time.monotonic() - changed_at <= APPLIES_WITHIN
    assert claimed() == 3


def test_the_override_wins_over_the_code_across_a_worker_restart(workers):  # noqa: F811
    queue(QUEUE).enqueue_many([{"sleep": 30}] * 8)
    first = start(workers)
    wait_until(lambda: claimed() == 1, timeout=20, what=f"the code's cap:\n{first.output}")
    operations.set_limits(QUEUE, concurrency=2)
    wait_until(lambda: claimed() == 2, timeout=20, what=f"the override:\n{first.output}")
    first.stop(signal.SIGTERM, timeout=30)
    wait_until(lambda: claimed() == 0, timeout=10, what="the stopped worker's jobs released")

    second = start(workers)

    wait_until(lambda: claimed() == 2, timeout=20, what=f"the override kept:\n{second.output}")
    row = Consumer.objects.get(queue=QUEUE)
    assert row.code_limits == {"concurrency": 1}  # written again by the second worker
    assert row.limit_overrides == {"concurrency": 2}
