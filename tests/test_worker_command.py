"""`manage.py alk_worker` as operators run it: real worker subprocesses against the test DB.

Each test starts workers through tests/workers.py, drives them with the shop consumers'
payload flags (sleep, fail_times, fail, permanent, retry_in) and asserts through the rows:
HandlerRun (one per handler execution, with its attempt), QueueMessage, DeadLetter, Worker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median

import pytest
from django.db import connection, connections, transaction
from django.test.utils import override_settings
from django.utils import timezone

from django_alkqueue import Job, queue
from django_alkqueue.jobs import FAILED, MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, Worker
from testproject.shop.consumers import deliver_webhook
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.workers import Watched, start_worker

pytestmark = pytest.mark.django_db(transaction=True)

SEND_EMAIL = "testproject.shop.consumers.send_email"
FOREIGN_HANDLER = "billing.consumers.send_invoice"


# -- harness ---------------------------------------------------------------------------------


class Running(Watched):
    """A worker started for one test: wait for its exit, or for a clean end of a burst."""

    def wait(self, timeout: float) -> int:
        """Wait for the exit; returns the exit code."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker still running after {timeout}s:\n{self.output}") from None
        self._reader.join(5)
        return code

    def finish(self, timeout: float = 60) -> str:
        """Wait for a --burst / --max-jobs worker to end on its own; it must exit 0."""
        code = self.wait(timeout)
        assert code == 0, f"worker exited {code}:\n{self.output}"
        return self.output

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.alive():
            self.process.send_signal(sig)
        return self.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group (a supervisor and its children too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self._reader.join(5)


@pytest.fixture
def workers() -> Iterator[Callable[..., Running]]:
    """start(*alk_worker_args) -> Running; every process group is SIGKILLed at teardown."""
    started: list[Running] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Running:
        running = Running(start_worker(*args, env=env))
        started.append(running)
        return running

    yield start
    for running in started:
        running.kill()


def runs_of(job: Job) -> list[int]:
    """The attempt numbers of the handler executions of `job`, in order."""
    return list(
        HandlerRun.objects.filter(job_id=job.id).order_by("id").values_list("attempt", flat=True)
    )


def live(job: Job) -> QueueMessage | None:
    return QueueMessage.objects.filter(pk=job.id).first()


def dead(job: Job) -> DeadLetter:
    return DeadLetter.objects.get(job_id=job.id)


def has_run(job: Job) -> Callable[[], bool]:
    return lambda: HandlerRun.objects.filter(job_id=job.id).exists()


def is_gone(job: Job) -> Callable[[], bool]:
    return lambda: not QueueMessage.objects.filter(pk=job.id).exists()


# -- end to end ------------------------------------------------------------------------------


def test_burst_worker_drains_500_jobs_across_three_queues_acking_each_once(workers):
    sizes = {"shop-emails": 200, "shop-reports": 150, "shop-webhooks": 150}
    jobs: list[Job] = []
    for name, size in sizes.items():
        # Low priority enqueued first, so handout order differs from insertion order.
        for band, priority in enumerate((0, 5, 10)):
            payloads = [{"i": i} for i in range(size) if i % 3 == band]
            jobs += queue(name, priority=priority).enqueue_many(payloads)
    assert len(jobs) == 500
    assert Counter(j.queue for j in jobs) == sizes

    output = workers("--burst", "--concurrency", "4").finish(timeout=60)

    assert QueueMessage.objects.count() == 0
    assert DeadLetter.objects.count() == 0
    runs = list(HandlerRun.objects.order_by("id").values_list("job_id", "queue", "attempt"))
    assert Counter(job_id for job_id, _, _ in runs) == Counter(j.id for j in jobs)
    by_id = {j.id: j for j in jobs}
    assert all(queue_name == by_id[job_id].queue for job_id, queue_name, _ in runs)
    assert {attempt for _, _, attempt in runs} == {1}
    # Priority order within each queue: the high band runs, on the whole, before the low one.
    for name in sizes:
        order = [by_id[job_id].priority for job_id, queue_name, _ in runs if queue_name == name]
        positions = {p: [i for i, q in enumerate(order) if q == p] for p in (0, 5, 10)}
        assert median(positions[10]) < median(positions[5]) < median(positions[0]), name
    for name in sizes:
        assert name in output, output


# -- heartbeat service, crash, shutdown -----------------------------------------------------------


def test_the_heartbeat_service_keeps_a_job_running_three_times_its_lease_with_one_worker(workers):
    job = queue("shop-reports", lease=1).enqueue({"sleep": 3})
    first = workers("--queue", "shop-reports", "--concurrency", "1", "--poll-interval", "0.1")
    second = workers("--queue", "shop-reports", "--concurrency", "1", "--poll-interval", "0.1")

    holders: set[str] = set()
    attempts: set[int] = set()

    def finished() -> bool:
        row = live(job)
        if row is None:
            return True
        if row.claimed_by:
            holders.add(row.claimed_by)
        attempts.add(row.attempts)
        return False

    wait_until(finished, timeout=15)
    detail = f"\n--- first:\n{first.output}\n--- second:\n{second.output}"
    assert runs_of(job) == [1], detail
    assert len(holders) == 1, f"handed to {holders}{detail}"
    assert attempts <= {0, 1}, detail
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert "heartbeat refused" not in first.output + second.output
    assert first.stop() == 0
    assert second.stop() == 0


def test_job_of_a_sigkilled_worker_is_reclaimed_and_completed_by_another(workers):
    # Lease 2 s, handler 1 s: the second worker's run fits in the lease on its own, so this
    # test is about the crash and the reclaim, not about heartbeat.
    job = queue("shop-reports", lease=2).enqueue({"sleep": 1})
    crashing = workers("--queue", "shop-reports", "--concurrency", "1")
    wait_until(has_run(job), timeout=15)
    crashing.kill()

    row = live(job)
    assert row is not None, "the job vanished with its worker"
    assert row.claim_token is not None and row.attempts == 1
    crashed_pid = HandlerRun.objects.get(job_id=job.id).worker

    rescuer = workers("--queue", "shop-reports", "--concurrency", "1", "--poll-interval", "0.2")
    wait_until(is_gone(job), timeout=15)

    assert runs_of(job) == [1, 2]  # the lapsed attempt stays counted
    second_run = HandlerRun.objects.filter(job_id=job.id).order_by("id").last()
    assert second_run.worker == str(rescuer.pid) != crashed_pid
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert rescuer.stop() == 0, rescuer.output


def test_sigterm_lets_in_flight_jobs_finish_then_exits_0(workers):
    jobs = queue("shop-reports").enqueue_many([{"sleep": 1, "n": n} for n in range(6)])
    worker = workers(
        "--queue", "shop-reports", "--concurrency", "2", "--shutdown-timeout", "10", "--batch", "2"
    )
    wait_until(lambda: HandlerRun.objects.count() == 2, timeout=15)
    started = time.monotonic()

    assert worker.stop(signal.SIGTERM, timeout=15) == 0, worker.output

    assert time.monotonic() - started < 10
    ran = set(HandlerRun.objects.values_list("job_id", flat=True))
    assert len(ran) == 2
    assert not QueueMessage.objects.filter(pk__in=ran).exists()  # finished and acked
    rest = QueueMessage.objects.exclude(pk__in=ran)
    assert rest.count() == 4
    assert not rest.filter(claim_token__isnull=False).exists()
    assert {r.attempts for r in rest} == {0}
    assert DeadLetter.objects.count() == 0
    assert {j.id for j in jobs} == ran | set(rest.values_list("pk", flat=True))


def test_sigterm_releases_jobs_unfinished_at_the_shutdown_timeout_for_another_worker(workers):
    jobs = queue("shop-reports").enqueue_many([{"sleep": 5, "n": n} for n in range(2)])
    worker = workers(
        "--queue", "shop-reports", "--concurrency", "2", "--shutdown-timeout", "0.5",
        "--poll-interval", "0.2",
    )  # fmt: skip
    wait_until(lambda: HandlerRun.objects.count() == 2, timeout=15)
    started = time.monotonic()

    assert worker.stop(signal.SIGTERM, timeout=15) == 0, worker.output

    elapsed = time.monotonic() - started
    assert elapsed < 3.5, f"exit took {elapsed:.1f}s: the worker waited for its handlers"
    assert "released 2 unfinished jobs" in worker.output, worker.output
    rows = list(QueueMessage.objects.order_by("pk"))
    assert [r.pk for r in rows] == [j.id for j in jobs]
    for row in rows:
        assert row.claim_token is None and row.claimed_by is None
        assert row.lease_expires_at is None
        assert row.run_at <= timezone.now()
        assert row.attempts == 0  # released, not failed: the attempt is given back

    workers("--queue", "shop-reports", "--concurrency", "2", "--burst").finish(timeout=30)

    assert QueueMessage.objects.count() == 0
    assert DeadLetter.objects.count() == 0
    for job in jobs:
        assert runs_of(job) == [1, 1]


def test_sigterm_is_honoured_promptly_while_every_handler_thread_is_busy(workers):
    # One thread, busy; a long poll interval: the signal must not wait for either.
    job = queue("shop-reports").enqueue({"sleep": 6})
    worker = workers(
        "--queue", "shop-reports", "--concurrency", "1", "--shutdown-timeout", "0.5",
        "--poll-interval", "30",
    )  # fmt: skip
    wait_until(has_run(job), timeout=15)
    started = time.monotonic()

    assert worker.stop(signal.SIGTERM, timeout=15) == 0, worker.output

    elapsed = time.monotonic() - started
    assert elapsed < 3.5, f"exit took {elapsed:.1f}s after SIGTERM\n{worker.output}"
    row = live(job)
    assert row is not None and row.claim_token is None and row.attempts == 0


# -- leadership and wake-ups (PostgreSQL) ----------------------------------------------------


def leaders() -> list[str]:
    return list(Worker.objects.filter(is_leader=True).values_list("worker_id", flat=True))


@pytest.mark.postgres_only
def test_exactly_one_worker_leads_and_another_takes_over_when_it_is_killed(workers):
    running = [workers("--poll-interval", "0.5") for _ in range(3)]
    wait_until(lambda: Worker.objects.count() == 3 and len(leaders()) == 1, timeout=15)

    def one_leader_throughout(seconds: float, until: Callable[[str], bool] | None = None) -> None:
        """Sample the rows: exactly one leader at every sample; stop early once `until`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            current = leaders()
            assert len(current) == 1, f"leaders at one moment: {current}"
            if until is not None and until(current[0]):
                return
            time.sleep(0.02)
        assert until is None, f"no takeover within {seconds}s"

    one_leader_throughout(2.0)
    (old_leader,) = leaders()
    leader_pid = Worker.objects.get(worker_id=old_leader).pid
    (victim,) = [r for r in running if r.pid == leader_pid]
    victim.kill()

    one_leader_throughout(15.0, until=lambda leader: leader != old_leader)
    (new_leader,) = leaders()
    assert new_leader != old_leader
    survivors = {r.pid for r in running if r is not victim}
    assert Worker.objects.get(worker_id=new_leader).pid in survivors
    one_leader_throughout(1.0)
    for r in running:
        if r is not victim:
            assert r.stop() == 0, r.output


def listener_ready() -> bool:
    """The worker's dedicated LISTEN connection is open on this test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query ILIKE 'LISTEN%%'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.postgres_only
def test_notify_wakes_an_idle_worker_long_before_its_poll_interval(workers):
    worker = workers("--queue", "shop-emails", "--poll-interval", "30")
    wait_until(lambda: Worker.objects.exists() and listener_ready(), timeout=15)

    first = queue("shop-emails").enqueue({"n": 1})
    wait_until(is_gone(first), timeout=5)
    # Now the worker has claimed, found nothing more and sleeps on its 30 s poll.
    second = queue("shop-emails").enqueue({"n": 2})
    wait_until(is_gone(second), timeout=5)

    assert runs_of(first) == [1] and runs_of(second) == [1]
    assert worker.stop() == 0, worker.output


@pytest.mark.postgres_only
def test_a_job_enqueued_within_the_window_of_a_notify_is_found_by_the_follow_up_look(workers):
    # The worker follows each NOTIFY up 3.05 s later; its poll would take 30 s.
    worker = workers("--queue", "shop-emails", "--poll-interval", "30",
                     env={"ALKQUEUE_NOTIFY_WINDOW": "3"})  # fmt: skip
    wait_until(lambda: Worker.objects.exists() and listener_ready(), timeout=15)
    with override_settings(ALKQUEUE={"NOTIFY_WINDOW": 3600.0}):
        first = queue("shop-emails").enqueue({"n": 1})  # notifies
        wait_until(is_gone(first), timeout=5)
        # Sent no NOTIFY (the window of the first); the worker claimed, found nothing, sleeps.
        second = queue("shop-emails").enqueue({"n": 2})

    wait_until(is_gone(second), timeout=15)
    assert runs_of(second) == [1]
    assert worker.stop() == 0, worker.output


@pytest.mark.postgres_only
def test_the_leader_vacuums_the_live_table_once_dead_rows_pile_up(workers):
    def manual_vacuums() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'alkqueue_message'"
            )
            return int(cursor.fetchone()[0])

    before = manual_vacuums()
    jobs = queue("shop-noop").enqueue_many([{"n": n} for n in range(200)])  # 400 dead rows, acked
    worker = workers("--queue", "shop-noop", env={"ALKQUEUE_VACUUM_DEAD_TUPLES": "300"})
    wait_until(lambda: not QueueMessage.objects.filter(pk__in=[j.id for j in jobs]).exists())
    # The acks reach PostgreSQL's statistics within seconds; the leader checks every 5 s.
    wait_until(lambda: manual_vacuums() > before, timeout=40, every=0.5)
    assert worker.stop() == 0, worker.output


def cluster_restart_command() -> list[str] | None:
    versions = sorted(os.listdir("/etc/postgresql")) if Path("/etc/postgresql").is_dir() else []
    if os.environ.get("CHAOS_NO_CLUSTER_RESTARTS"):
        return None  # the local cluster is shared with other runs (see tests/chaos/conftest.py)
    if os.geteuid() != 0 or not shutil.which("pg_ctlcluster") or len(versions) != 1:
        return None
    return ["pg_ctlcluster", "--skip-systemctl-redirect", versions[0], "main", "restart"]


@pytest.mark.postgres_only
@pytest.mark.serial
@pytest.mark.slow
def test_worker_survives_a_database_restart_and_completes_every_job(workers):
    restart = cluster_restart_command()
    if restart is None:
        pytest.skip(
            "restarting PostgreSQL needs root, pg_ctlcluster with one cluster and an unshared "
            "cluster (CHAOS_NO_CLUSTER_RESTARTS unset)"
        )
    # A short lease, so that jobs whose outcome could not be written during the outage are
    # reclaimed in seconds rather than after the default 30 s.
    jobs = queue("shop-reports", lease=3).enqueue_many(
        [{"n": n, "sleep": 0.004} for n in range(2000)]
    )
    worker = workers("--queue", "shop-reports", "--concurrency", "4", "--poll-interval", "0.2")
    wait_until(lambda: HandlerRun.objects.count() >= 300, timeout=20)

    subprocess.run(restart, check=True, capture_output=True, timeout=60)
    connections.close_all()  # this test's own connection died with the server

    assert QueueMessage.objects.count() > 0, "the drain ended before the restart"
    wait_until(lambda: QueueMessage.objects.count() == 0, timeout=30)
    assert worker.alive(), worker.output
    assert DeadLetter.objects.count() == 0
    ran = set(HandlerRun.objects.values_list("job_id", flat=True))
    assert ran == {j.id for j in jobs}
    assert "database error" in worker.output  # the restart did hit the worker
    assert worker.stop() == 0, worker.output


# -- consumers: paused, one per queue --------------------------------------------------------


def test_burst_worker_leaves_a_paused_queue_alone_until_it_is_unpaused(workers):
    Consumer.objects.create(
        queue="shop-webhooks",
        handler=f"{deliver_webhook.__module__}.{deliver_webhook.__qualname__}",
        lease=30,
        max_attempts=2,
        paused=True,
    )
    held = queue("shop-webhooks").enqueue_many([{"n": n} for n in range(3)])
    other = queue("shop-emails").enqueue({"n": 0})

    workers("--queue", "shop-webhooks", "--queue", "shop-emails", "--burst").finish(timeout=30)

    assert runs_of(other) == [1]
    assert not HandlerRun.objects.filter(queue="shop-webhooks").exists()
    waiting = QueueMessage.objects.filter(queue="shop-webhooks")
    assert sorted(waiting.values_list("pk", flat=True)) == [j.id for j in held]
    assert not waiting.filter(claim_token__isnull=False).exists()
    assert Consumer.objects.get(queue="shop-webhooks").paused  # the worker's sync keeps the flag

    Consumer.objects.filter(queue="shop-webhooks").update(paused=False)
    workers("--queue", "shop-webhooks", "--burst").finish(timeout=30)

    assert QueueMessage.objects.count() == 0
    assert all(runs_of(j) == [1] for j in held)


def test_worker_refuses_a_queue_whose_consumer_row_names_another_handler(workers):
    Consumer.objects.create(queue="shop-emails", handler=FOREIGN_HANDLER, lease=30, max_attempts=5)
    job = queue("shop-emails").enqueue({"n": 0})

    refused = workers("--queue", "shop-emails", "--burst")
    code = refused.wait(30)

    assert code != 0
    assert FOREIGN_HANDLER in refused.output and SEND_EMAIL in refused.output, refused.output
    assert Consumer.objects.get(queue="shop-emails").handler == FOREIGN_HANDLER
    assert live(job) is not None and live(job).claim_token is None
    assert runs_of(job) == []
    assert not Worker.objects.exists()


def test_takeover_lets_a_worker_replace_another_handlers_consumer_row(workers):
    Consumer.objects.create(queue="shop-emails", handler=FOREIGN_HANDLER, lease=30, max_attempts=5)
    job = queue("shop-emails").enqueue({"n": 0})

    workers("--queue", "shop-emails", "--burst", "--takeover").finish(timeout=30)

    assert Consumer.objects.get(queue="shop-emails").handler == SEND_EMAIL
    assert runs_of(job) == [1] and live(job) is None


# -- outcomes through the real worker --------------------------------------------------------


@pytest.fixture
def emails_worker(workers) -> Iterator[Running]:
    """A worker serving shop-emails (max_attempts 3, constant backoff 0, retry_on TemporaryError).
    Not --burst: these tests are about outcomes, so they wait for the rows instead."""
    worker = workers("--queue", "shop-emails", "--poll-interval", "0.1")
    yield worker
    assert worker.stop() == 0, worker.output


def is_dead(job: Job) -> Callable[[], bool]:
    return lambda: DeadLetter.objects.filter(job_id=job.id).exists()


def test_raising_handler_is_retried_then_dead_lettered_with_class_and_traceback(emails_worker):
    job = queue("shop-emails").enqueue({"fail_times": 99})

    wait_until(is_dead(job), timeout=15)

    assert runs_of(job) == [1, 2, 3]
    letter = dead(job)
    assert letter.reason == MAX_ATTEMPTS_EXCEEDED
    assert letter.attempts == 3
    headline = letter.last_error.splitlines()[0]
    assert headline == "TemporaryError: temporary failure on attempt 3"  # the bare class name
    assert "Traceback (most recent call last)" in letter.last_error
    assert "in _act" in letter.last_error  # the frame that raised
    assert live(job) is None


def test_fail_dead_letters_at_once_with_its_reason(emails_worker):
    job = queue("shop-emails").enqueue({"fail": "customer unsubscribed"})

    wait_until(is_dead(job), timeout=15)

    assert runs_of(job) == [1]
    letter = dead(job)
    assert letter.reason == FAILED
    assert letter.attempts == 1
    assert letter.last_error == "customer unsubscribed"


def test_exception_outside_retry_on_dead_letters_after_one_attempt(emails_worker):
    job = queue("shop-emails").enqueue({"permanent": True})  # retry_on=(TemporaryError,)

    wait_until(is_dead(job), timeout=15)

    assert runs_of(job) == [1]
    letter = dead(job)
    assert letter.attempts == 1 < letter.max_attempts
    headline = letter.last_error.splitlines()[0]
    assert headline == "PermanentError: the address does not exist"
    assert "Traceback (most recent call last)" in letter.last_error


def test_retry_outcome_runs_the_job_again_after_its_delay(emails_worker):
    job = queue("shop-emails").enqueue({"retry_in": 0})

    wait_until(is_gone(job), timeout=15)

    assert runs_of(job) == [1, 2]
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert f"shop-emails job {job.id} retried" in emails_worker.output


def test_burst_worker_does_not_exit_while_a_retried_job_is_due(workers):
    # A retry with delay 0 is due at once, so --burst must run it. The window in which a
    # worker could miss it is short, hence several runs.
    for _ in range(6):
        job = queue("shop-emails").enqueue({"fail_times": 1})
        output = workers("--queue", "shop-emails", "--burst").finish(timeout=30)
        assert live(job) is None, f"burst exited with job {job.id} due:\n{output}"
        assert runs_of(job) == [1, 2]


@pytest.mark.row_locks
def test_burst_worker_does_not_exit_while_a_due_job_is_locked_by_another_transaction(workers):
    # A claim skips locked rows (SKIP LOCKED): one came back empty while a maintenance read
    # held the only due row for a moment, and the burst ended with the job left behind.
    job = queue("shop-emails").enqueue({})
    with transaction.atomic():
        QueueMessage.objects.select_for_update().get(pk=job.id)
        running = workers("--queue", "shop-emails", "--burst", "--poll-interval", "0.2")
        wait_until(Worker.objects.exists, timeout=30, what=f"the worker started\n{running.output}")
        time.sleep(1)  # several looks while the row is held
        assert running.alive(), f"burst exited with job {job.id} due:\n{running.output}"
    running.finish(timeout=30)
    assert live(job) is None and runs_of(job) == [1]


# -- process options -------------------------------------------------------------------------


def test_max_jobs_exits_0_after_that_many_jobs_leaving_nothing_claimed(workers):
    queue("shop-reports").enqueue_many([{"n": n} for n in range(10)])

    workers("--queue", "shop-reports", "--max-jobs", "3", "--concurrency", "2").finish(timeout=30)

    assert HandlerRun.objects.count() == 3
    ran = set(HandlerRun.objects.values_list("job_id", flat=True))
    assert not QueueMessage.objects.filter(pk__in=ran).exists()
    assert QueueMessage.objects.count() == 7
    assert not QueueMessage.objects.filter(claim_token__isnull=False).exists()
    assert set(QueueMessage.objects.values_list("attempts", flat=True)) == {0}
    assert not Worker.objects.exists()  # a clean exit removes its registry row


def test_two_processes_in_burst_mode_drain_a_queue_and_exit_0(workers):
    jobs = queue("shop-reports").enqueue_many([{"n": n, "sleep": 0.1} for n in range(40)])

    workers("--queue", "shop-reports", "--processes", "2", "--concurrency", "2", "--burst").finish(
        timeout=60
    )

    assert QueueMessage.objects.count() == 0
    assert DeadLetter.objects.count() == 0
    assert Counter(HandlerRun.objects.values_list("job_id", flat=True)) == Counter(
        j.id for j in jobs
    )
    assert len(set(HandlerRun.objects.values_list("worker", flat=True))) == 2
