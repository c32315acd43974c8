"""Scenario 6, poison jobs, under `alk_worker --processes 2` (the supervisor):

- a handler that raises on every attempt ends dead ("max attempts exceeded") after its two;
- a handler that never returns, with the heartbeat service stopped for its queue, outlives its
  1 s lease on every attempt: each lapse hands the job out again, and once its attempts are
  spent it is dead-lettered, never acked;
- a handler that calls os._exit takes its process down; the supervisor counts a crash for
  each job that process was running, gives them back at once and starts another process:
  the one that exits once then completes, the one that exits every time ends dead at its
  second crash ("crashed its worker");

while ordinary jobs on another queue keep flowing, before and after the crashes. A job
that ran beside an exiting one in its process has a crash counted too (the supervisor
cannot tell which handler ended it, docs/reliability.md): one cut short by two exits is
dead ("crashed its worker"), the documented price of four threads a process."""

from __future__ import annotations

import random

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.jobs import CRASHED_ITS_WORKER, MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.chaos.apps import NO_HEARTBEATS_ENV
from testproject.chaos.models import ExecutionLog, Gate

from .harness import Fleet, serving, wait_for
from .invariants import Fault, check
from .record import Stopwatch, record
from .scale import pick

pytestmark = [pytest.mark.row_locks, pytest.mark.django_db(transaction=True)]

POISON, FLOW = "chaos-poison", "chaos-flow"  # poison: lease 1 s, 2 attempts
FLOW_JOBS = pick(short=150, long=2_000)  # per wave; two waves
HANDLER_MS = (10, 60)
RELEASE = "poison released"


def outcomes(job_id: int) -> list[tuple[int, str]]:
    return list(
        ExecutionLog.objects.filter(job_id=job_id).order_by("id").values_list("attempt", "outcome")
    )


def assert_ran_as(job_id: int, outcome: str, *, process_exits: int) -> None:
    """Every run of the job that ended ended in `outcome`. A run may also be cut short (""),
    or a claim never reach its handler, when another poison job takes the process down at
    that moment: the job was claimed in the same batch as the exiting one. Its lapsed lease
    then spends the attempt, so a job can be dead-lettered with no run of its own ended; that
    is only possible when processes exited at least once per attempt it lost."""
    ended = {o for _, o in outcomes(job_id)} - {""}
    assert ended <= {outcome}, (job_id, outcomes(job_id))
    assert ended or process_exits >= 2, (job_id, outcomes(job_id), process_exits)


def crashed_beside(job_ids: list[int], process_exits: int) -> set[int]:
    """Of `job_ids`, those dead as "crashed its worker" though their handler does not exit
    every time: they ran beside an exiting job twice, or exited once themselves and ran
    beside another's exit once. Each crash counted needs a process exit (checked); a run
    counted may have left no ExecutionLog row, when its process died before the handler's
    first write committed."""
    dead = set(
        DeadLetter.objects.filter(job_id__in=job_ids, reason=CRASHED_ITS_WORKER).values_list(
            "job_id", flat=True
        )
    )
    assert not dead or process_exits >= 2, (dead, process_exits)
    return dead


def test_poison_jobs_end_dead_or_reclaimed_while_other_jobs_keep_flowing(fleet: Fleet):
    rng = random.Random(6)

    def flow_wave(wave: int) -> list[int]:
        payloads = [
            {"wave": wave, "i": i, "ms": round(rng.uniform(*HANDLER_MS), 1)}
            for i in range(FLOW_JOBS)
        ]
        return [j.id for j in queue(FLOW).enqueue_many(payloads)]

    poison = queue(POISON)
    raiser = poison.enqueue({"fail_on": [1, 2]}).id
    blocker = poison.enqueue({"block": {"1": [RELEASE, 120], "2": [RELEASE, 120]}}).id
    # Attempts to spare: another job's exit may take down the process running its second.
    exit_once = poison.enqueue({"exit_on": [1]}, max_attempts=5).id
    exit_always = poison.enqueue({"exit_on": [1, 2]}).id
    first_wave = flow_wave(1)
    clock = Stopwatch()
    started = timezone.now()
    supervisor = fleet.start(
        *serving(POISON, FLOW, threads=4, processes=2), env={NO_HEARTBEATS_ENV: POISON}
    )

    poison_ids = [raiser, blocker, exit_once, exit_always]
    wait_for(
        lambda: not QueueMessage.objects.filter(pk__in=poison_ids).exists(),
        timeout=pick(90, 300),
        what="the poison jobs dead or done",
    )
    second_wave = flow_wave(2)  # enqueued after the crashes: served by restarted processes
    wait_for(
        lambda: (
            not QueueMessage.objects.filter(
                pk__in=[*poison_ids, *first_wave, *second_wave]
            ).exists()
        ),
        timeout=pick(90, 300),
        what="every job finished",
    )
    supervisor_alive = supervisor.alive()
    Gate.objects.create(name=RELEASE)  # the blocked handlers may return now (their acks fail)
    ended = timezone.now()
    codes = fleet.stop_all(timeout=60)

    exits = ExecutionLog.objects.filter(outcome="exited").values_list("worker_id", "finished_at")
    faults = [Fault("process exit", at, at, frozenset({worker})) for worker, at in exits]
    faults.append(Fault("heartbeat service stopped", started, ended, queues=frozenset({POISON})))
    ids = [*poison_ids, *first_wave, *second_wave]
    others = [raiser, blocker, exit_once, *first_wave, *second_wave]
    beside = crashed_beside(others, len(exits))
    expect = dict.fromkeys(ids, "acked") | dict.fromkeys([raiser, blocker, exit_always], "dead")
    expect |= dict.fromkeys(beside, "dead")
    report = check(ids, faults, expect=expect)
    pids = set(ExecutionLog.objects.values_list("pid", flat=True))
    record(
        6,
        "Poison jobs",
        "under --processes 2: a job raising on every attempt, one blocking past its 1 s "
        "lease with the heartbeat service stopped, one os._exit-ing once, one on every attempt; "
        f"{2 * FLOW_JOBS:,} ordinary jobs on another queue, half of them enqueued after "
        "the crashes",
        report,
        clock.seconds(),
        {
            "process_exits": len(exits),
            "worker_processes_seen": len(pids),
            "supervisor_alive": supervisor_alive,
            "dead_beside_a_crash": len(beside),
        },
    )
    output = fleet.outputs()
    assert report.ok, report.summary() + output
    # What each handler did, run by run.
    assert_ran_as(raiser, "failed", process_exits=len(exits))
    assert_ran_as(blocker, "blocked", process_exits=len(exits))
    assert {o for _, o in outcomes(exit_always)} - {""} == {"exited"}
    assert {o for _, o in outcomes(exit_once)} - {""} <= {"exited", "completed"}
    if exit_once not in beside:
        assert outcomes(exit_once)[-1][1] == "completed"
    assert len(exits) >= 2  # at least the two attempts of the job exiting every time
    reasons = dict(DeadLetter.objects.filter(job_id__in=poison_ids).values_list("job_id", "reason"))
    assert reasons[exit_always] == CRASHED_ITS_WORKER
    for job_id in (raiser, blocker):
        assert reasons[job_id] == (
            CRASHED_ITS_WORKER if job_id in beside else MAX_ATTEMPTS_EXCEEDED
        )
    assert len(pids) >= 3, "no worker process was restarted"
    assert supervisor_alive, "the supervisor gave up:\n" + output
    assert set(codes.values()) == {0}, output


def test_supervisor_keeps_serving_when_poison_jobs_crash_its_fresh_processes(fleet: Fleet):
    crashers = [queue(POISON).enqueue({"exit_on": [1, 2], "n": n}).id for n in range(3)]
    flow = [j.id for j in queue(FLOW).enqueue_many([{"i": i, "ms": 20} for i in range(100)])]
    supervisor = fleet.start(
        *serving(POISON, FLOW, threads=1, processes=2), env={NO_HEARTBEATS_ENV: POISON}
    )

    def settled() -> bool:
        done = not QueueMessage.objects.filter(pk__in=[*crashers, *flow]).exists()
        return done or not supervisor.alive()

    wait_for(settled, timeout=pick(90, 180), what="the poison jobs dead and the flow drained")
    alive = supervisor.alive()
    left = QueueMessage.objects.filter(pk__in=flow).count()
    fleet.stop_all()
    assert alive, f"the supervisor exited, leaving {left} ordinary jobs:\n{fleet.outputs()}"
    assert left == 0
    exits = ExecutionLog.objects.filter(outcome="exited").values_list("worker_id", "finished_at")
    faults = [Fault("process exit", at, at, frozenset({worker})) for worker, at in exits]
    report = check([*crashers, *flow], faults, expect=dict.fromkeys(flow, "acked"))
    assert report.ok, report.summary() + fleet.outputs()
