"""Debounce and unique windows (issue 52) under real processes: enqueues of one key from
several processes and threads at once, and worker subprocesses running what they leave."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage, UniqueWindow
from tests.conftest import wait_until
from tests.enqueue_control_consumers import DEBOUNCED, RUNS, WINDOWED
from tests.workers import ROOT, Watched, database_env, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES, THREADS, EACH = 3, 3, 5


@pytest.fixture
def runs_table() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {RUNS} (job_id BIGINT, queue VARCHAR(100), payload VARCHAR(255), "
            "phase VARCHAR(10))"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {RUNS}")


@pytest.fixture
def worker(runs_table: None) -> Iterator[Watched]:
    env = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.enqueue_control_consumers"}
    args = (
        "--queue",
        DEBOUNCED,
        "--queue",
        WINDOWED,
        "--concurrency",
        "2",
        "--poll-interval",
        "0.2",
    )
    watched = Watched(start_worker(*args, env=env))
    yield watched
    stop(watched.process)


def runs(phase: str) -> list[tuple[int, dict[str, object]]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, payload FROM {RUNS} WHERE phase = %s", [phase])
        return [(int(job_id), json.loads(text)) for job_id, text in cursor.fetchall()]


def burst(mode: str, name: str, tmp_path: Path) -> list[int | None]:
    """PROCESSES processes of THREADS threads, EACH enqueues a thread, started together."""
    go = tmp_path / "go"
    env = {**database_env(), "BURST_GO": str(go)}
    command = [sys.executable, "-m", "tests.enqueue_control_burst", mode, name,
               str(THREADS), str(EACH)]  # fmt: skip
    processes = [
        subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(PROCESSES)
    ]
    go.touch()
    ids: list[int | None] = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        ids.extend(json.loads(out))
    assert len(ids) == PROCESSES * THREADS * EACH
    return ids


def test_debounced_enqueues_from_several_processes_leave_one_unclaimed_job(tmp_path):
    ids = burst("debounce", "debounce-burst", tmp_path)
    assert len(set(ids)) == 1
    assert list(
        QueueMessage.objects.filter(queue="debounce-burst").values_list("id", flat=True)
    ) == [ids[0]]


def test_windowed_enqueues_from_several_processes_write_one_job(tmp_path):
    ids = burst("window", "window-burst", tmp_path)
    assert len(set(ids)) == 1 and ids[0] is not None
    assert QueueMessage.objects.filter(queue="window-burst").count() == 1
    assert UniqueWindow.objects.get(queue="window-burst").job_id == ids[0]


def test_a_burst_runs_once_with_its_last_payload(worker):
    q = queue(DEBOUNCED)
    ids = {q.enqueue({"n": n}, debounce_key="doc-7", debounce=1.5).id for n in range(10)}
    assert len(ids) == 1
    wait_until(lambda: len(runs("finished")) == 1, timeout=30, what="the debounced run")
    wait_until(lambda: not QueueMessage.objects.filter(queue=DEBOUNCED).exists(), timeout=10)
    assert runs("finished") == [(ids.pop(), {"n": 9})]


def test_a_change_made_while_the_job_runs_gets_a_job_of_its_own(worker):
    q = queue(DEBOUNCED)
    first = q.enqueue({"v": 1, "sleep": 2}, debounce_key="doc-8", debounce=0.2)
    wait_until(lambda: len(runs("started")) == 1, timeout=30, what="the first run's start")
    second = q.enqueue({"v": 2}, debounce_key="doc-8", debounce=0.2)
    assert second.id != first.id
    wait_until(lambda: len(runs("finished")) == 2, timeout=30, what="both runs")
    assert sorted(runs("finished"), key=lambda run: run[0]) == [
        (first.id, {"v": 1, "sleep": 2}),
        (second.id, {"v": 2}),
    ]


def test_a_key_whose_job_ran_stays_taken_for_its_window(worker):
    q = queue(WINDOWED)
    first = q.enqueue({"digest": 42}, unique_key="digest:42", unique_for=timedelta(hours=1))
    assert first is not None
    wait_until(lambda: len(runs("finished")) == 1, timeout=30, what="the digest's run")
    wait_until(lambda: not QueueMessage.objects.filter(queue=WINDOWED).exists(), timeout=10)
    assert q.enqueue({"digest": 42}, unique_key="digest:42", unique_for=timedelta(hours=1)) is None
    assert not QueueMessage.objects.filter(queue=WINDOWED).exists()
    assert runs("finished") == [(first.id, {"digest": 42})]
