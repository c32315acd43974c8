"""A sensitive queue's payload never reaches the worker's error texts or its log lines.

Exception messages often quote the payload (a KeyError names the key, a ValueError the
value), so for a sensitive queue (privacy.py) the worker stores the class names and the
traceback's frames, and withholds every message but the reasons of Retry and Fail.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from django_alkqueue import Fail, Retry
from django_alkqueue.backoff import RetryPolicy
from django_alkqueue.consumers import ConsumerSpec
from django_alkqueue.error_text import WITHHELD
from django_alkqueue.models import DeadLetter
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.executor import Executor
from django_alkqueue.worker.inflight import InFlight
from tests.workers import run_worker

CARD = "4111111111111111"
EMAIL = "jane@example.com"
PAYLOAD = {"card": CARD, "email": EMAIL}


def decline(payload, job):
    try:
        raise LookupError(f"no account for {payload['email']}")
    except LookupError as exc:
        raise ValueError(f"card {payload['card']} declined") from exc


def run_handler(q, handler):
    """Claim one job of `q` and run `handler` on it as a worker does."""
    inflight, stats = InFlight(), WorkerStats()
    acker = AckService("default", inflight, stats, window=0)
    spec = ConsumerSpec(
        queue=q.name, handler=handler, path="tests.handler", lease=None, max_attempts=None,
        retry=RetryPolicy(backoff="constant", base=0, jitter=False), atomic=False, batch=None,
    )  # fmt: skip
    executor = Executor({q.name: spec}, acker, inflight, stats, "default")
    handle = q.claim_one("w")
    inflight.add(handle)
    executor.run(handle)
    acker.flush()
    return handle.job


@pytest.fixture
def cards(make_queue):
    with override_settings(ALKQUEUE={"QUEUES": {"cards": {"sensitive": True}}}):
        yield make_queue("cards", max_attempts=2)


@pytest.mark.django_db
def test_the_error_text_of_a_sensitive_queue_withholds_every_exception_message(cards):
    job = cards.enqueue(PAYLOAD)

    run_handler(cards, decline)

    text = cards.get_job(job.id).last_error
    assert CARD not in text and EMAIL not in text
    assert text.startswith(f"ValueError {WITHHELD}")
    assert f"LookupError {WITHHELD}" in text  # the chain's classes stay
    assert "in decline" in text and "raise ValueError(" in text  # and its frames


@pytest.mark.django_db
def test_the_error_text_of_a_plain_queue_keeps_the_message(make_queue):
    plain = make_queue("plain", max_attempts=2)
    job = plain.enqueue(PAYLOAD)

    run_handler(plain, decline)

    assert plain.get_job(job.id).last_error.startswith(f"ValueError: card {CARD} declined")


@pytest.mark.django_db
def test_a_sensitive_queue_keeps_the_reasons_a_handler_gave_retry_and_fail(cards):
    retried, failed = cards.enqueue(PAYLOAD), cards.enqueue(PAYLOAD)

    def handler(payload, job):
        if job.id == retried.id:
            raise Retry(delay=60, reason="gateway busy")
        raise Fail("card declined")

    run_handler(cards, handler)
    run_handler(cards, handler)

    assert cards.get_job(retried.id).last_error.startswith("Retry: gateway busy")
    assert DeadLetter.objects.get(job_id=failed.id).last_error == "card declined"


@pytest.mark.django_db(transaction=True)
def test_a_worker_never_writes_a_sensitive_payload_to_its_output_or_its_dead_letters():
    from django_alkqueue import queue

    job = queue("private-cards").enqueue(PAYLOAD)

    output = run_worker("--queue", "private-cards", "--burst", "-v", "3",
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"})  # fmt: skip

    dead = DeadLetter.objects.get(job_id=job.id)  # two attempts, both failed
    assert f"ValueError {WITHHELD}" in dead.last_error
    for secret in (CARD, EMAIL):
        assert secret not in dead.last_error
        assert secret not in output


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sensitive", [True, False])
def test_a_task_result_of_a_sensitive_queue_stores_its_traceback_without_messages(sensitive):
    from django.core.management import call_command

    from testproject.shop import tasks

    with override_settings(ALKQUEUE={"QUEUES": {"default": {"sensitive": sensitive}}}):
        result = tasks.flaky.enqueue(succeed_on=2)  # attempt 1 raises "not yet (attempt 1)"
        call_command("alk_worker", queue=["default"], burst=True, verbosity=0)

    result.refresh()
    [error] = result.errors
    assert ("not yet (attempt 1)" in error.traceback) is not sensitive
    assert (f"ValueError {WITHHELD}" in error.traceback) is sensitive
    assert "in flaky" in error.traceback


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pool", [[], ["--pool", "process"]], ids=["threads", "process-pool"])
def test_a_keyboard_interrupt_from_a_sensitive_handler_is_logged_without_its_message(pool):
    from django_alkqueue import queue

    queue("private-interrupt").enqueue(PAYLOAD)

    output = run_worker("--queue", "private-interrupt", "--burst", "-v", "3", *pool,
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"})  # fmt: skip

    assert "KeyboardInterrupt" in output  # the line is there, its message is not
    assert CARD not in output, output
