"""`manage.py alk_health` and its checks (reports/health.py): one line per problem, one exit
status per kind of problem, the database and migrations first."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from django_alkqueue.models import Consumer, QueueMessage, Worker
from django_alkqueue.queues import Queue
from django_alkqueue.reports import health
from django_alkqueue.reports.status import oldest_pending_ages
from django_alkqueue.sql.queue_scans import oldest_unclaimed_sql
from django_alkqueue.worker.queue_stats import QueueStatCountService
from tests.clocks import FakeClock
from tests.conftest import fill_ten_queues
from tests.workers import database_env, run_manage

pytestmark = pytest.mark.django_db

STALE_AFTER = 30.0


#: A pid no process has: checks() sees any other pid but its own as gone.
GONE = 999_999_999


def beat(
    worker_id: str,
    at: datetime,
    *,
    leader: bool = False,
    host: str = "web1",
    pid: int = os.getpid(),
    queues: tuple[str, ...] = ("q",),
) -> Worker:
    return Worker.objects.create(
        worker_id=worker_id,
        hostname=host,
        pid=pid,
        queues=list(queues),
        concurrency=1,
        started_at=at,
        last_heartbeat_at=at,
        is_leader=leader,
    )


def checks(now: datetime, **options: object) -> list[health.Problem]:
    return health.run_checks(
        "default",
        now,
        health.HealthOptions(stale_after=STALE_AFTER, **options),  # type: ignore[arg-type]
        hostname="web1",
        process_exists=lambda pid: pid == os.getpid(),
    )


def alk_health(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("alk_health", *args, stdout=out)
    except SystemExit as exit:
        return int(exit.code or 0), out.getvalue()
    return 0, out.getvalue()


# -- the leader --------------------------------------------------------------------------------


def test_a_live_leader_and_nothing_else_asked_is_healthy(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    assert checks(clock.now) == []


def test_no_worker_at_all_is_no_live_leader(clock: FakeClock):
    (problem,) = checks(clock.now)
    assert (problem.check, problem.code) == ("leader", health.NO_LEADER)


def test_a_leader_whose_heartbeat_is_stale_is_no_live_leader(clock: FakeClock):
    beat("w1", clock.now - timedelta(seconds=STALE_AFTER + 1), leader=True)
    beat("w2", clock.now)
    assert [p.code for p in checks(clock.now)] == [health.NO_LEADER]


# -- the oldest pending job ------------------------------------------------------------------


def test_a_queue_whose_oldest_pending_job_waited_past_max_age_is_behind(
    clock: FakeClock, make_queue: Callable[..., Queue]
):
    make_queue("slow").enqueue({})
    make_queue("quick")
    clock.advance(120)
    beat("w1", clock.now, leader=True)
    make_queue("quick").enqueue({})

    problems = checks(clock.now, max_age=60.0)

    assert [(p.check, p.code, p.subject) for p in problems] == [
        ("queue", health.QUEUE_BEHIND, "slow")
    ]
    assert "120 s" in problems[0].message


def test_max_age_applies_only_to_the_queues_named(clock: FakeClock, make_queue):
    make_queue("slow").enqueue({})
    make_queue("other").enqueue({})
    clock.advance(120)
    beat("w1", clock.now, leader=True)
    problems = checks(clock.now, max_age=60.0, queues=("other",))
    assert [p.subject for p in problems] == ["other"]


def test_scheduled_and_claimed_jobs_are_not_pending(clock: FakeClock, make_queue):
    q = make_queue("q", lease=3600)
    q.enqueue({}, delay=timedelta(hours=1))
    q.enqueue({})
    q.claim("w1", 1)
    clock.advance(600)
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, max_age=60.0) == []


def test_a_paused_queue_is_left_out_of_max_age(clock: FakeClock, make_queue):
    make_queue("held").enqueue({})
    Consumer.objects.create(queue="held", handler="x.y", lease=30, max_attempts=3, paused=True)
    clock.advance(600)
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, max_age=60.0) == []


def test_the_oldest_pending_job_is_found_below_a_newer_higher_priority_one(
    clock: FakeClock, make_queue
):
    q = make_queue("mixed")
    q.enqueue({}, priority=-5)
    clock.advance(50)
    q.enqueue({}, priority=10)
    q.enqueue({}, priority=0)
    clock.advance(10)
    assert oldest_pending_ages("default", clock.now) == {"mixed": 60.0}


def test_oldest_pending_ages_of_no_queue_reads_nothing(clock: FakeClock, make_queue):
    make_queue("q").enqueue({})
    assert oldest_pending_ages("default", clock.now, ()) == {}


# -- the leader's readings narrow the probes -------------------------------------------------


def test_without_a_recent_reading_every_queue_is_a_suspect(clock: FakeClock, make_queue):
    make_queue("a").enqueue({})
    assert health.behind_suspects("default", clock.now, 60.0) is None


def test_the_suspects_are_the_queues_whose_read_age_plus_the_time_since_passes_max_age(
    clock: FakeClock, make_queue
):
    make_queue("old").enqueue({})
    clock.advance(50)
    make_queue("young").enqueue({})
    QueueStatCountService("default").run_once(clock.now)  # old: 50 s, young: 0 s
    clock.advance(20)
    assert health.behind_suspects("default", clock.now, 60.0) == ["old"]


def test_a_named_queue_the_leader_has_not_read_is_a_suspect(clock: FakeClock, make_queue):
    make_queue("read").enqueue({})
    QueueStatCountService("default").run_once(clock.now)
    assert health.behind_suspects("default", clock.now, 60.0, ("read", "new")) == ["new"]


def test_a_queue_read_as_behind_that_caught_up_since_is_healthy(clock: FakeClock, make_queue):
    q = make_queue("slow", lease=3600)
    q.enqueue({})
    clock.advance(120)
    QueueStatCountService("default").run_once(clock.now)
    (handle,) = q.claim("w1", 1)
    handle.ack()
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, max_age=60.0) == []


def test_a_queue_read_as_behind_and_still_behind_is_reported(clock: FakeClock, make_queue):
    make_queue("slow").enqueue({})
    clock.advance(120)
    QueueStatCountService("default").run_once(clock.now)
    clock.advance(5)
    beat("w1", clock.now, leader=True)
    assert [p.subject for p in checks(clock.now, max_age=60.0)] == ["slow"]


# -- workers -----------------------------------------------------------------------------------


def test_a_named_worker_with_a_fresh_heartbeat_is_healthy(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, workers=("w1",)) == []


def test_a_named_worker_with_a_stale_heartbeat_is_a_problem(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    beat("w2", clock.now - timedelta(seconds=45))
    (problem,) = checks(clock.now, workers=("w2",))
    assert (problem.code, problem.subject) == (health.WORKER_STALE, "w2")
    assert "45 s ago" in problem.message


def test_a_named_worker_without_a_row_is_a_problem(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    (problem,) = checks(clock.now, workers=("gone",))
    assert (problem.code, problem.subject) == (health.WORKER_STALE, "gone")


def test_this_host_without_a_live_worker_is_a_problem(clock: FakeClock):
    beat("w1", clock.now, leader=True, host="elsewhere")
    (problem,) = checks(clock.now, this_host=True)
    assert (problem.code, problem.subject) == (health.WORKER_STALE, "web1")


def test_this_host_with_a_stale_worker_still_running_is_a_problem(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    beat("stuck", clock.now - timedelta(seconds=60), pid=os.getpid())
    assert [p.subject for p in checks(clock.now, this_host=True)] == ["stuck"]


def test_this_host_ignores_the_stale_row_of_a_process_that_is_gone(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    beat("crashed", clock.now - timedelta(seconds=60), pid=GONE)
    assert checks(clock.now, this_host=True) == []


# -- a fresh row whose process is gone (issue 48, defect 16) ---------------------------------


def test_a_fresh_leader_row_of_this_host_whose_process_is_gone_is_no_live_leader(
    clock: FakeClock,
):
    beat("w1", clock.now, leader=True, pid=GONE)
    (problem,) = checks(clock.now)
    assert (problem.check, problem.code) == ("leader", health.NO_LEADER)


def test_a_fresh_leader_row_of_another_host_is_trusted_without_a_process_check(
    clock: FakeClock,
):
    beat("w1", clock.now, leader=True, host="web2", pid=GONE)
    assert checks(clock.now) == []


def test_this_host_whose_only_fresh_row_is_of_a_process_that_is_gone_has_no_live_worker(
    clock: FakeClock,
):
    beat("leader", clock.now, leader=True, host="web2")
    beat("crashed", clock.now, pid=GONE)
    (problem,) = checks(clock.now, this_host=True)
    assert (problem.code, problem.subject) == (health.WORKER_STALE, "web1")


def test_this_host_with_a_running_worker_beside_a_gone_one_is_healthy(clock: FakeClock):
    beat("w1", clock.now, leader=True)
    beat("crashed", clock.now, pid=GONE)  # a supervisor's child, replaced by w1
    assert checks(clock.now, this_host=True) == []


def test_a_named_worker_of_this_host_whose_process_is_gone_is_a_problem(clock: FakeClock):
    beat("leader", clock.now, leader=True, host="web2")
    beat("w2", clock.now, pid=GONE)
    (problem,) = checks(clock.now, workers=("w2",))
    assert (problem.code, problem.subject) == (health.WORKER_STALE, "w2")
    assert "not running" in problem.message


def test_a_named_worker_of_another_host_is_judged_by_its_heartbeat_alone(clock: FakeClock):
    beat("leader", clock.now, leader=True, host="web2")
    beat("w2", clock.now, host="web2", pid=GONE)
    assert checks(clock.now, workers=("w2",)) == []


# -- orphaned: pending jobs of a queue no live worker serves ------------------------------------


def test_a_pending_job_of_a_queue_no_live_worker_serves_is_orphaned_past_the_threshold(
    clock: FakeClock, make_queue
):
    make_queue("emals").enqueue({})  # a misspelled queue name
    clock.advance(61)
    beat("w1", clock.now, leader=True, queues=("emails",))

    problems = checks(clock.now, orphaned_after=60.0)

    assert [(p.check, p.code, p.subject) for p in problems] == [
        ("orphaned", health.ORPHANED, "emals")
    ]
    assert problems[0].message == (
        "queue 'emals': a pending job has waited 61 s and no live worker serves the queue"
    )


def test_a_queue_a_live_worker_serves_is_not_orphaned(clock: FakeClock, make_queue):
    make_queue("emails").enqueue({})
    clock.advance(600)
    beat("w1", clock.now, leader=True, queues=("reports", "emails"))
    assert checks(clock.now, orphaned_after=60.0) == []


def test_a_queue_only_a_stale_worker_served_is_orphaned(clock: FakeClock, make_queue):
    make_queue("emails").enqueue({})
    beat("w-old", clock.now, queues=("emails",))
    clock.advance(600)
    beat("w1", clock.now, leader=True, queues=("reports",))
    assert [p.subject for p in checks(clock.now, orphaned_after=60.0)] == ["emails"]


def test_a_pending_job_younger_than_the_threshold_is_not_orphaned(clock: FakeClock, make_queue):
    make_queue("emals").enqueue({})
    clock.advance(59)
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, orphaned_after=60.0) == []


def test_scheduled_and_paused_jobs_are_not_orphaned(clock: FakeClock, make_queue):
    make_queue("later").enqueue({}, delay=timedelta(hours=1))
    make_queue("held").enqueue({})
    Consumer.objects.create(queue="held", handler="x.y", lease=30, max_attempts=3, paused=True)
    clock.advance(600)
    beat("w1", clock.now, leader=True)
    assert checks(clock.now, orphaned_after=60.0) == []


def due_61_seconds_ago(name: str) -> None:
    """A pending job of `name` that has waited 61 s (the command's clock is the real one)."""
    due = timezone.now() - timedelta(seconds=61)
    QueueMessage.objects.create(queue=name, payload={}, max_attempts=3, backoff_base=1, lease=30,
                                run_at=due, enqueued_at=due)  # fmt: skip


def test_alk_health_reports_an_orphaned_queue_after_60_s_by_default_with_exit_8():
    beat("w1", timezone.now(), leader=True, queues=("emails",))
    due_61_seconds_ago("emals")

    code, out = alk_health()

    assert code == health.ORPHANED
    assert out.startswith("queue 'emals': a pending job has waited 61 s and no live worker ")


def test_alk_health_orphaned_after_sets_the_threshold():
    beat("w1", timezone.now(), leader=True, queues=("emails",))
    due_61_seconds_ago("emals")
    assert alk_health("--orphaned-after", "120") == (0, "healthy\n")


# -- migrations and the exit status ----------------------------------------------------------


def test_an_unapplied_migration_is_reported_alone():
    applied = MigrationRecorder(connection).migration_qs.filter(app="django_alkqueue")
    last = applied.order_by("-id").first()
    assert last is not None
    last.delete()
    code, out = alk_health()
    assert code == health.MIGRATIONS_UNAPPLIED
    assert out.strip() == f"1 unapplied migration: django_alkqueue.{last.name}"


def test_the_exit_status_is_the_most_fundamental_problems():
    beat("w1", timezone.now() - timedelta(hours=1), leader=True)
    code, out = alk_health("--worker", "w1")
    assert code == health.NO_LEADER
    assert len(out.strip().splitlines()) == 2  # one line per problem


def test_healthy_prints_healthy_and_exits_0():
    beat("w1", timezone.now(), leader=True)
    assert alk_health() == (0, "healthy\n")


def test_json_lists_each_problem_with_its_status():
    beat("w1", timezone.now(), leader=True)
    code, out = alk_health("--json", "--worker", "nope")
    assert code == health.WORKER_STALE
    assert json.loads(out) == {
        "healthy": False,
        "exit_status": health.WORKER_STALE,
        "problems": [
            {
                "check": "worker",
                "code": health.WORKER_STALE,
                "message": "worker 'nope': not registered",
                "subject": "nope",
            }
        ],
    }


def test_queue_without_max_age_is_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--max-age"):
        call_command("alk_health", "--queue", "q")


# -- a database that does not answer (a real process, a real failed connection) ---------------


def test_an_unreachable_database_exits_3_with_one_line(tmp_path):
    if connection.vendor == "sqlite":
        env = {"ALKQUEUE_SQLITE_NAME": str(tmp_path / "missing-dir" / "db.sqlite3")}
    elif connection.vendor == "postgresql":
        env = {"DATABASE_URL": "postgres://root@127.0.0.1:1/nowhere"}
    else:
        env = {"DATABASE_URL": "mysql://alkqueue:alkqueue@127.0.0.1:1/nowhere"}
    result = run_manage("alk_health", env_extra=env)
    assert result.returncode == health.DATABASE_UNREACHABLE, result.stderr
    (line,) = result.stdout.strip().splitlines()
    assert line.startswith("database 'default' unreachable: ")
    assert database_env()  # the rest of the environment is the test run's


# -- the plan of the oldest-pending statement --------------------------------------------------


def test_the_oldest_pending_statement_probes_the_pending_index_on_100k_rows(is_postgres):
    if not is_postgres:
        pytest.skip("PostgreSQL's plan (the SQLite one is below)")
    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        cursor.execute("EXPLAIN " + oldest_unclaimed_sql())
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "alkqueue_pending_idx" in plan, plan
    assert "Seq Scan on alkqueue_message" not in plan, plan


def test_on_sqlite_the_oldest_pending_statement_searches_the_pending_index():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plan")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + oldest_unclaimed_sql())
        steps = [str(row[-1]) for row in cursor.fetchall()]
    reads = [s for s in steps if "alkqueue_message" in s or s.startswith(("SEARCH m ", "SCAN m "))]
    # The first and the next name, the first and the next priority, the earliest run_at.
    assert len(reads) == 5, steps
    assert all(s.startswith("SEARCH") and "INDEX alkqueue_pending_idx" in s for s in reads), steps
