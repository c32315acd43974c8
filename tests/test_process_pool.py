"""The process pool (`alk_worker --pool process`, docs/running-jobs.md): handlers run in child
processes; past a time limit the child is terminated, a child that dies fails its attempt
naming the signal, a cancel reaches the handler in its child, children are recycled after
--max-jobs-per-child, and atomic consumers commit in the child's own transaction."""

from __future__ import annotations

import os
import signal

import pytest

from django_alkqueue import queue
from django_alkqueue.error_text import WITHHELD
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.shop.models import HandlerRun
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, run_manage, start_worker, stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("running_consumers"),
]

CONSUMERS = RUNNING_CONSUMERS
ASYNC = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.async_consumers"}
SENSITIVE = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"}


def notes(job_id: int) -> list[tuple[int, str]]:
    return list(
        HandlerRun.objects.filter(job_id=job_id).order_by("id").values_list("attempt", "note")
    )


def pid_of(job_id: int, attempt: int = 1) -> int:
    note = next(n for a, n in notes(job_id) if a == attempt and "pid=" in n)
    return int(note.rsplit("pid=", 1)[1])


def first_attempts_child(job_id: int, worker: Watched) -> int:
    """Wait for the job's first attempt to start in a child; that child's pid."""
    wait_until(lambda: any(a == 1 for a, _ in notes(job_id)), timeout=60,
               what=f"the first attempt\n{worker.output}")  # fmt: skip
    return pid_of(job_id)


def process_worker(*args: str) -> Watched:
    return Watched(start_worker("--pool", "process", "--shutdown-timeout", "2", *args,
                                env=CONSUMERS))  # fmt: skip


def test_a_burst_of_jobs_is_drained_in_child_processes():
    jobs = queue("pids").enqueue_many([{} for _ in range(6)])

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "2", "--burst",
                        "--queue", "pids", env_extra=CONSUMERS, timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert not QueueMessage.objects.filter(queue="pids").exists()
    pids = {pid_of(job.id) for job in jobs}
    assert os.getpid() not in pids
    assert 1 <= len(pids) <= 2


def test_the_supervisors_worker_processes_run_their_handlers_in_a_process_pool_too():
    jobs = queue("pids").enqueue_many([{} for _ in range(4)])

    result = run_manage("alk_worker", "--processes", "2", "--pool", "process", "--burst",
                        "--queue", "pids", env_extra=CONSUMERS, timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    for job in jobs:
        (worker,) = HandlerRun.objects.filter(job_id=job.id).values_list("worker", flat=True)
        assert pid_of(job.id) != int(worker.rsplit(":", 1)[1])  # not the worker's own pid


def test_a_handler_past_its_time_limit_is_sigtermed_and_its_attempt_retried():
    job = queue("overrunning-unwound").enqueue({})
    worker = process_worker("--queue", "overrunning-unwound", "--concurrency", "1")
    try:
        wait_until(lambda: any(a == 2 for a, _ in notes(job.id)), timeout=60,
                   what=f"the second attempt\n{worker.output}")  # fmt: skip
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=30,
                   what=f"the second attempt acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert (1, "unwound by Terminated") in notes(job.id)
    assert pid_of(job.id, 1) != pid_of(job.id, 2)  # the terminated child was replaced
    assert not DeadLetter.objects.filter(job_id=job.id).exists()


def test_a_child_killed_from_outside_fails_its_attempt_naming_sigkill_and_is_retried():
    job = queue("killable").enqueue({})
    worker = process_worker("--queue", "killable", "--concurrency", "1")
    try:
        child = first_attempts_child(job.id, worker)

        os.kill(child, signal.SIGKILL)

        wait_until(lambda: any(a == 2 for a, _ in notes(job.id)), timeout=60,
                   what=f"the second attempt\n{worker.output}")  # fmt: skip
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=30,
                   what=f"the second attempt acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert (2, f"last error: WorkerChildDied: child {child} killed by SIGKILL") in notes(job.id)
    assert pid_of(job.id, 2) != child


def test_a_child_that_exits_mid_job_fails_its_attempt_naming_its_exit_status():
    job = queue("exiting").enqueue({})

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--queue", "exiting", env_extra=CONSUMERS, timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    child = pid_of(job.id, 1)
    assert (2, f"last error: WorkerChildDied: child {child} exited with status 3") in notes(job.id)


def test_an_atomic_handler_past_its_limit_is_terminated_and_its_writes_roll_back():
    job = queue("atomic-overrunning").enqueue({})
    worker = process_worker("--queue", "atomic-overrunning", "--concurrency", "1",
                            "--kill-grace", "1")  # fmt: skip
    try:
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=60,
                   what=f"the second attempt acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    # Only the second attempt's record committed; it saw the first one's error.
    assert notes(job.id) == [(2, "last error: TimeLimitExceeded: ran longer than 1 s")]


def test_a_cancelled_running_job_sees_its_flag_in_its_child():
    job = queue("cancellable").enqueue({})
    worker = process_worker("--queue", "cancellable")
    try:
        wait_until(lambda: (1, "started") in notes(job.id), timeout=60,
                   what=f"the handler's start\n{worker.output}")  # fmt: skip

        assert queue("cancellable").cancel(job.id) is True

        wait_until(lambda: (1, "saw cancel") in notes(job.id), timeout=30,
                   what=f"the handler seeing its cancel\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert (1, "never cancelled") not in notes(job.id)


def test_a_cancelled_handler_that_does_not_return_has_its_child_terminated_after_the_grace():
    job = queue("cancel-ignoring").enqueue({})
    worker = process_worker("--queue", "cancel-ignoring", "--kill-grace", "1")
    try:
        child = first_attempts_child(job.id, worker)

        queue("cancel-ignoring").cancel(job.id)

        wait_until(lambda: (1, "saw cancel; sleeping on") in notes(job.id), timeout=30,
                   what=f"the handler seeing its cancel\n{worker.output}")  # fmt: skip
        wait_until(lambda: not _alive(child), timeout=30,
                   what=f"the child's end\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not DeadLetter.objects.filter(job_id=job.id).exists()


def test_children_are_replaced_after_max_jobs_per_child():
    jobs = queue("pids").enqueue_many([{} for _ in range(4)])

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--max-jobs-per-child", "2", "--queue", "pids",
                        env_extra=CONSUMERS, timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    pids = [pid_of(job.id) for job in jobs]
    assert pids[0] == pids[1] != pids[2] == pids[3]


def test_an_atomic_consumer_commits_in_its_child_and_a_failed_attempt_rolls_back():
    job = queue("atomic-second-try").enqueue({})

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--queue", "atomic-second-try", env_extra=CONSUMERS,
                        timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert not QueueMessage.objects.filter(id=job.id).exists(), result.stdout + result.stderr
    # The first attempt's record rolled back with its failure; the second committed with
    # its ack.
    assert [a for a, _ in notes(job.id)] == [2]
    assert pid_of(job.id, 2) != os.getpid()
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not DeadLetter.objects.filter(job_id=job.id).exists()


def test_a_batch_handlers_failures_come_back_from_its_child_and_only_those_jobs_retry():
    jobs = queue("batch-failing-odd").enqueue_many([{"n": n} for n in range(4)])

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--queue", "batch-failing-odd", env_extra=CONSUMERS,
                        timeout=120)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert [[a for a, _ in notes(job.id)] for job in jobs] == [[1], [1, 2], [1], [1, 2]]
    assert not DeadLetter.objects.filter(job_id__in=[job.id for job in jobs]).exists()


def test_each_job_of_a_batch_call_past_its_limit_is_retried_in_the_process_pool():
    jobs = queue("overrunning-batch").enqueue_many([{"n": n} for n in range(3)])
    worker = process_worker("--queue", "overrunning-batch", "--concurrency", "1")
    try:
        ids = [job.id for job in jobs]
        wait_until(lambda: not QueueMessage.objects.filter(id__in=ids).exists(), timeout=60,
                   what=f"the second attempts acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    for job in jobs:
        assert [a for a, n in notes(job.id) if n == "started"] == [1, 2]
    assert not DeadLetter.objects.filter(job_id__in=ids).exists()


def test_a_sensitive_queues_error_text_is_written_without_messages_in_the_child():
    job = queue("private-cards").enqueue({"card": "4111 1111 1111 1111", "email": "a@b.example"})

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--queue", "private-cards", "-v", "3", timeout=120,
                        env_extra=SENSITIVE)  # fmt: skip

    dead = DeadLetter.objects.get(job_id=job.id)
    assert f"ValueError {WITHHELD}" in dead.last_error
    assert 'raise ValueError(f"card' in dead.last_error  # the child's traceback frames
    for secret in ("4111 1111 1111 1111", "a@b.example"):
        assert secret not in dead.last_error
        assert secret not in result.stdout + result.stderr


def test_progress_reported_in_a_child_is_written_and_read_back():
    job = queue("reporting").enqueue({"steps": 4})
    worker = process_worker("--queue", "reporting")
    try:
        wait_until(lambda: _done(job.id) == 4, timeout=60,
                   what=f"the last progress written\n{worker.output}")  # fmt: skip
        progress = queue("reporting").get_job(job.id).progress
        assert (progress.total, progress.note) == (4, "step 4")
    finally:
        queue("reporting").cancel(job.id)
        stop(worker.process)


def test_an_async_handler_runs_on_its_childs_event_loop_and_its_failure_is_retried():
    jobs = queue("async-jobs").enqueue_many([{"fail_times": 1} for _ in range(2)])

    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "2", "--burst",
                        "--queue", "async-jobs", timeout=120, env_extra=ASYNC)  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert not QueueMessage.objects.filter(queue="async-jobs").exists()
    for job in jobs:
        assert [a for a, _ in notes(job.id)] == [1, 2]


def test_stopping_the_worker_releases_a_running_job_and_ends_its_child():
    job = queue("killable").enqueue({})
    worker = process_worker("--queue", "killable", "--kill-grace", "1")
    try:
        child = first_attempts_child(job.id, worker)
    finally:
        stop(worker.process)
    assert worker.process.returncode == 0, worker.output
    wait_until(lambda: not _alive(child), timeout=10, what="the child's end")
    released = queue("killable").get_job(job.id)
    assert (released.state, released.attempts) == ("pending", 0)


def _done(job_id: int) -> float | None:
    found = queue("reporting").get_job(job_id)
    return None if found is None or found.progress is None else found.progress.done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
