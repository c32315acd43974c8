"""Wake-ups between the processes of one host, on databases without NOTIFY (SQLite, MariaDB:
sql/local_wakeups.py): an enqueue, once committed, wakes this host's idle workers through
their sockets, so a job starts in milliseconds instead of at the next poll; a worker on
another host still finds it at its next poll."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.test.utils import override_settings

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from django_alkqueue.sql import dialect_for
from django_alkqueue.sql.local_wakeups import directory, forget, inbox, send
from tests.conftest import wait_until
from tests.test_worker_command import Running, workers  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

LONG = 3600.0  # no window runs out during a test


@pytest.fixture(autouse=True)
def without_notify() -> None:
    if dialect_for(connection).supports_notify:
        pytest.skip("PostgreSQL wakes its workers with NOTIFY (tests/test_wake_pacing.py)")


@pytest.fixture
def short_path() -> Iterator[Path]:
    """A directory of the test's own with a short name: a socket's path has at most 107
    bytes, and pytest's tmp_path is long."""
    path = Path(tempfile.mkdtemp(prefix="alkq-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def root(short_path: Path) -> Iterator[str]:
    """A wake-up directory of the test's own, with no window: every enqueue wakes."""
    forget(connections[DEFAULT_DB_ALIAS])
    with override_settings(ALKQUEUE={"WAKEUP_DIRECTORY": str(short_path), "NOTIFY_WINDOW": 0.0}):
        yield str(short_path)


def test_an_enqueue_wakes_a_socket_of_this_host(root: str):
    with inbox(connection, root) as wait:
        queue("shop-emails").enqueue({"to": "a@example.com"})

        assert wait(5.0) == ["shop-emails"]


def test_an_enqueue_inside_a_transaction_wakes_only_at_its_commit(root: str):
    with inbox(connection, root) as wait:
        with transaction.atomic():
            queue("shop-emails").enqueue({"to": "a@example.com"})
            assert wait(0.1) == []

        assert wait(5.0) == ["shop-emails"]


def test_a_rolled_back_enqueue_wakes_nobody(root: str):
    with inbox(connection, root) as wait:
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            queue("shop-emails").enqueue({"to": "a@example.com"})
            1 / 0  # noqa: B018

        assert wait(0.2) == []


def test_single_enqueues_within_the_window_send_one_wake_up(short_path: Path):
    forget(connections[DEFAULT_DB_ALIAS])
    settings = {"WAKEUP_DIRECTORY": str(short_path), "NOTIFY_WINDOW": LONG}
    with override_settings(ALKQUEUE=settings), inbox(connection, str(short_path)) as wait:
        for n in range(3):
            queue("shop-emails").enqueue({"n": n})

        assert wait(5.0) == ["shop-emails"]
        assert wait(0.2) == []


def test_enqueue_many_always_wakes(short_path: Path):
    forget(connections[DEFAULT_DB_ALIAS])
    settings = {"WAKEUP_DIRECTORY": str(short_path), "NOTIFY_WINDOW": LONG}
    with override_settings(ALKQUEUE=settings), inbox(connection, str(short_path)) as wait:
        queue("shop-emails").enqueue({"n": 0})
        assert wait(5.0) == ["shop-emails"]

        queue("shop-emails").enqueue_many([{"n": 1}, {"n": 2}])

        assert wait(5.0) == ["shop-emails"]


def test_every_worker_socket_of_the_database_hears_the_wake_up(root: str):
    with inbox(connection, root) as first, inbox(connection, root) as second:
        queue("shop-emails").enqueue({"to": "a@example.com"})

        assert (first(5.0), second(5.0)) == (["shop-emails"], ["shop-emails"])


def test_a_socket_in_another_directory_hears_nothing(
    root: str,
):
    elsewhere = tempfile.mkdtemp(prefix="alkq-")
    with inbox(connection, elsewhere) as wait:
        queue("shop-emails").enqueue({"to": "a@example.com"})

        assert wait(0.2) == []


def test_the_socket_of_a_worker_that_is_gone_is_removed(root: str):
    path = directory(connection, root)
    path.mkdir(parents=True, exist_ok=True)
    gone = path / "1-killed.sock"
    left_behind = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left_behind.bind(str(gone))
    left_behind.close()  # as after SIGKILL: the file stays, nobody reads it

    with inbox(connection, root) as wait:
        assert send(path, "shop-emails") == 1
        assert wait(5.0) == ["shop-emails"]
    assert not gone.exists()
    assert list(path.iterdir()) == []  # the inbox took its own socket away too


def test_an_idle_worker_starts_a_job_enqueued_on_this_host_long_before_its_poll_interval(
    workers,  # noqa: F811
):
    worker: Running = workers("--queue", "shop-emails", "--poll-interval", "60")
    first = queue("shop-emails").enqueue({"to": "first@example.com"})
    # Its first full look, at start, may come before the enqueue: a wake-up or that look.
    wait_until(lambda: not QueueMessage.objects.filter(pk=first.id).exists(), timeout=30,
               what=f"the first job done\n{worker.output}")  # fmt: skip
    time.sleep(0.5)  # idle now, until a wake-up or its next poll a minute away

    started = time.monotonic()
    job = queue("shop-emails").enqueue({"to": "second@example.com"})
    wait_until(lambda: not QueueMessage.objects.filter(pk=job.id).exists(), timeout=30,
               what=f"the second job done\n{worker.output}")  # fmt: skip

    assert time.monotonic() - started < 20  # woken: a poll would take a minute
    assert worker.stop() == 0, worker.output


def test_a_worker_on_another_host_still_finds_a_job_at_its_next_poll(
    workers,  # noqa: F811
    short_path: Path,
):
    other_host = {"ALKQUEUE_WAKEUP_DIRECTORY": str(short_path)}
    worker: Running = workers("--queue", "shop-emails", "--poll-interval", "1", env=other_host)
    wait_until(lambda: any(short_path.rglob("*.sock")), timeout=30,
               what=f"the worker's socket bound\n{worker.output}")  # fmt: skip
    own_sockets = {p.name for p in short_path.rglob("*.sock")}

    job = queue("shop-emails").enqueue({"to": "a@example.com"})

    wait_until(lambda: not QueueMessage.objects.filter(pk=job.id).exists(), timeout=30,
               what=f"the job done at a poll\n{worker.output}")  # fmt: skip
    assert {p.name for p in short_path.rglob("*.sock")} == own_sockets
    assert worker.stop() == 0, worker.output


def test_a_worker_that_cannot_bind_its_socket_says_so_and_polls(
    workers,  # noqa: F811
    tmp_path: Path,
):
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    env = {"ALKQUEUE_WAKEUP_DIRECTORY": str(not_a_directory)}
    worker: Running = workers("--queue", "shop-emails", "--poll-interval", "1", env=env)

    job = queue("shop-emails").enqueue({"to": "a@example.com"})

    wait_until(lambda: not QueueMessage.objects.filter(pk=job.id).exists(), timeout=30,
               what=f"the job done at a poll\n{worker.output}")  # fmt: skip
    assert worker.stop() == 0, worker.output
    assert "no wake-ups from enqueues on this host" in worker.output
    assert os.path.isfile(not_a_directory)
