"""The pipe between a worker process and its `--processes` supervisor (worker/job_notices.py):
the worker says which jobs its handlers run without ever waiting, and the supervisor knows,
when the process dies, which of them it was running; which exit statuses count as a crash
of its jobs (worker/child_exits.py)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest

from django_alkqueue.sql import Claim
from django_alkqueue.worker.child_exits import crashed_by_its_job
from django_alkqueue.worker.exits import WORKER_EXITS
from django_alkqueue.worker.job_notices import JobNotices, StartedJobs


def claims(count: int, first: int = 1) -> list[Claim]:
    return [Claim(first + n, uuid.uuid4()) for n in range(count)]


@pytest.fixture
def pipe() -> Iterator[tuple[StartedJobs, JobNotices]]:
    ours, theirs = os.pipe()
    yield StartedJobs(ours), JobNotices(theirs)
    os.close(theirs)
    os.close(ours)


def test_the_supervisor_learns_the_jobs_started_and_not_ended(pipe):
    reader, writer = pipe
    one, two, three = claims(3)
    writer.started([one, two])
    writer.started([three])
    writer.ended([two])

    reader.read()

    assert reader.running == {one, three}


def test_an_end_with_another_claim_token_leaves_the_running_claim(pipe):
    reader, writer = pipe
    (one,) = claims(1)
    writer.started([one])
    writer.ended([Claim(one.id, uuid.uuid4())])

    reader.read()

    assert reader.running == {one}


def test_a_batch_of_many_jobs_arrives_whole(pipe):
    reader, writer = pipe
    many = claims(500)
    writer.started(many)

    reader.read()

    assert reader.running == set(many)


def test_a_full_pipe_drops_the_notice_without_waiting(pipe):
    reader, writer = pipe
    many = claims(5000)
    for chunk in range(0, len(many), 100):
        writer.started(many[chunk : chunk + 100])  # far past the pipe's 64 KiB: never blocks

    reader.read()

    assert 0 < len(reader.running) < len(many)
    assert reader.running <= set(many)


def test_a_notice_to_a_supervisor_gone_is_dropped():
    ours, theirs = os.pipe()
    writer = JobNotices(theirs)
    os.close(ours)
    try:
        writer.started(claims(1))  # EPIPE: dropped
    finally:
        os.close(theirs)


def test_closing_reads_what_the_dead_process_wrote_last():
    ours, theirs = os.pipe()
    reader, writer = StartedJobs(ours), JobNotices(theirs)
    (one,) = claims(1)
    writer.started([one])
    os.close(theirs)  # the process is gone

    assert reader.close() == {one}
    assert reader.at_end


@pytest.mark.parametrize("status", sorted(WORKER_EXITS))
def test_a_worker_process_exiting_with_one_of_its_own_statuses_did_not_crash(status):
    assert not crashed_by_its_job(status, WORKER_EXITS)


@pytest.mark.parametrize("status", [3, 5, 255])
def test_a_worker_process_exiting_with_another_status_was_taken_down_by_a_handler(status):
    assert crashed_by_its_job(status, WORKER_EXITS)


@pytest.mark.parametrize("crash", [signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE])
def test_a_worker_process_dead_of_a_crash_signal_was_taken_down_by_a_handler(crash):
    assert crashed_by_its_job(-crash, WORKER_EXITS)


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_process_killed_from_outside_did_not_crash(kill):
    assert not crashed_by_its_job(-kill, WORKER_EXITS)
