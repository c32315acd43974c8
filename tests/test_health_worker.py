"""alk_health and --health-file against real worker processes."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import Worker
from django_alkqueue.reports import health
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.presence import PresenceService
from tests.clocks import FakeClock
from tests.conftest import wait_until
from tests.workers import Watched, run_manage, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

FAST_BEAT = {"ALKQUEUE_HEARTBEAT_INTERVAL": "0.2"}


def has_leader(worker_id: str) -> bool:
    return Worker.objects.filter(worker_id=worker_id, is_leader=True).exists()


def test_a_running_worker_is_healthy_and_a_stopped_one_is_not():
    worker = Watched(start_worker("--queue", "shop-noop", "--worker-id", "probe-1"))
    try:
        wait_until(lambda: has_leader("probe-1"), 30, what=f"leader\n{worker.output}")
        running = run_manage("alk_health", "--worker", "probe-1", "--this-host")
        assert (running.returncode, running.stdout) == (0, "healthy\n"), running.stderr
    finally:
        stop(worker.process)

    stopped = run_manage("alk_health", "--worker", "probe-1")
    assert stopped.returncode == health.NO_LEADER
    assert stopped.stdout.splitlines()[1:] == ["worker 'probe-1': not registered"]


def exited_worker(worker_id: str) -> None:
    """Start the only worker, wait for it to lead, then make its handler os._exit it: its
    row stays behind, as the leader's, with a fresh heartbeat."""
    worker = Watched(start_worker("--queue", "shop-emails", "--worker-id", worker_id))
    try:
        wait_until(lambda: has_leader(worker_id), 30, what=f"leader\n{worker.output}")
        queue("shop-emails").enqueue({"exit": True})
        assert worker.process.wait(30) == 3, worker.output  # reaped: its pid is gone
    finally:
        stop(worker.process)
    (row,) = Worker.objects.filter(worker_id=worker_id, is_leader=True)
    assert (timezone.now() - row.last_heartbeat_at).total_seconds() < 25


def problems_of(*args: str) -> tuple[int, list[tuple[str, str | None]]]:
    result = run_manage("alk_health", "--json", *args)
    report = json.loads(result.stdout)
    return result.returncode, [(p["check"], p["subject"]) for p in report["problems"]]


def test_after_the_only_worker_exits_alk_health_reports_no_live_leader_at_once():
    exited_worker("probe-exits")

    assert problems_of() == (health.NO_LEADER, [("leader", None)])


def test_after_the_only_worker_exits_alk_health_this_host_reports_no_live_worker_at_once():
    exited_worker("probe-exits")

    code, problems = problems_of("--this-host")

    assert code == health.NO_LEADER
    assert problems == [("leader", None), ("worker", socket.gethostname())]


def test_after_the_only_worker_exits_alk_health_worker_id_reports_it_at_once():
    exited_worker("probe-exits")

    code, problems = problems_of("--worker", "probe-exits")

    assert code == health.NO_LEADER
    assert problems == [("leader", None), ("worker", "probe-exits")]


def test_the_worker_touches_its_health_file_on_every_heartbeat(tmp_path):
    path = tmp_path / "alive"
    worker = Watched(
        start_worker("--queue", "shop-noop", "--health-file", str(path), env=FAST_BEAT)
    )
    try:
        wait_until(path.exists, 30, what=f"health file\n{worker.output}")
        os.utime(path, (1, 1))  # as if the last heartbeat were long ago
        wait_until(lambda: time.time() - path.stat().st_mtime < 60, 10, what="a fresh touch")
    finally:
        stop(worker.process)


def test_a_missing_health_file_directory_is_refused_before_start(tmp_path):
    result = run_manage(
        "alk_worker",
        "--queue",
        "shop-noop",
        "--burst",
        "--health-file",
        str(tmp_path / "no" / "alive"),
    )
    assert result.returncode == 1
    assert "--health-file" in result.stderr
    assert not Worker.objects.exists()


def test_a_heartbeat_touches_the_health_file(tmp_path):
    path = tmp_path / "alive"
    clock = FakeClock()
    presence = PresenceService("default", "w1", ["q"], 1, WorkerStats(), 5.0, str(path))
    presence.register(clock.now)
    os.utime(path, (1, 1))

    presence.run_once(clock.advance(5))

    assert path.stat().st_mtime > 1
