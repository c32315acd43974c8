"""Stored error text has a size cap (defaults.MAX_ERROR_CHARS): a longer text keeps its head
and its tail around a marker, on every path that stores one (docs/reference.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from django_alkqueue.defaults import MAX_ERROR_CHARS
from django_alkqueue.error_text import capped
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.tasks_compat import task_backends
from django_alkqueue.worker.executor import error_text

try:
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]

HUGE = "<" * 10_000_000
MARKER = re.compile(r"\n\n\[\.\.\. ([\d,]+) characters cut by django-alkqueue \.\.\.\]\n\n")


# -- the cap itself ---------------------------------------------------------------------------


def test_the_cap_is_64_kib_of_characters():
    assert MAX_ERROR_CHARS == 65536


def test_a_text_within_the_cap_is_kept_whole():
    text = "x" * MAX_ERROR_CHARS
    assert capped(text) is text


def test_a_text_over_the_cap_is_cut_to_the_cap():
    assert len(capped("x" * (MAX_ERROR_CHARS + 1))) == MAX_ERROR_CHARS
    assert len(capped(HUGE)) == MAX_ERROR_CHARS


def test_a_cut_text_keeps_its_head_and_its_tail():
    text = "Traceback (most recent call last):\n" + "  frame\n" * 100_000 + "ValueError: boom"
    kept = capped(text)
    assert kept.startswith("Traceback (most recent call last):\n")
    assert kept.endswith("ValueError: boom")


def test_the_marker_says_how_many_characters_were_cut():
    text = "a" * 1000 + "b" * 1000
    kept = capped(text, 300)
    marker = MARKER.search(kept)
    assert marker is not None
    cut = int(marker.group(1).replace(",", ""))
    assert len(kept) - len(marker.group(0)) + cut == len(text)


# -- every path that stores error text --------------------------------------------------------


def stored_errors() -> list[str]:
    live = QueueMessage.objects.exclude(last_error=None).values_list("last_error", flat=True)
    dead = DeadLetter.objects.values_list("last_error", flat=True)
    return [*live, *dead]


@pytest.mark.django_db
def test_fail_stores_at_most_the_cap(q):
    q.enqueue(1)
    [handle] = q.claim("w")
    assert handle.fail(HUGE)
    [text] = stored_errors()
    assert len(text) == MAX_ERROR_CHARS and text.startswith("<<<") and MARKER.search(text)


@pytest.mark.django_db
def test_retry_stores_at_most_the_cap(q):
    q.enqueue(1)
    [handle] = q.claim("w")
    assert handle.retry(HUGE, delay=60)
    [text] = stored_errors()
    assert len(text) == MAX_ERROR_CHARS


@pytest.mark.django_db
def test_a_retry_out_of_attempts_stores_at_most_the_cap(make_queue):
    q = make_queue("last", max_attempts=1)
    q.enqueue(1)
    [handle] = q.claim("w")
    assert handle.retry(HUGE)
    [text] = DeadLetter.objects.values_list("last_error", flat=True)
    assert len(text) == MAX_ERROR_CHARS


@pytest.mark.django_db
def test_the_workers_headline_and_traceback_are_stored_within_the_cap(q):
    q.enqueue(1)
    [handle] = q.claim("w")
    try:
        raise ValueError(HUGE)
    except ValueError as error:
        text = error_text(error)
    assert len(text) > 2 * len(HUGE)  # the worker quotes the message twice
    assert handle.fail(text)
    [stored] = stored_errors()
    assert len(stored) == MAX_ERROR_CHARS
    assert stored.startswith("ValueError: <<<") and stored.endswith("<")


@task()
def fails_with_a_huge_message() -> None:
    raise RuntimeError(HUGE)


@pytest.mark.django_db
def test_the_tasks_backend_stores_each_traceback_within_the_cap():
    from django_alkqueue import queue
    from django_alkqueue.models import TaskResult
    from django_alkqueue.task_runner import run_task_job

    result: Any = fails_with_a_huge_message.enqueue()
    [handle] = queue("default").claim("w")
    with pytest.raises(RuntimeError):
        run_task_job(handle.job.payload, handle.job)
    [error] = TaskResult.objects.get(job_id=int(result.id)).errors
    assert len(error["traceback"]) == MAX_ERROR_CHARS
    assert error["traceback"].startswith("Traceback")
    assert task_backends["default"].get_result(result.id).errors[0].traceback == error["traceback"]
