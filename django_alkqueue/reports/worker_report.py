"""What the worker prints: a line per finished job, a periodic summary, and its summary on
shutdown (the --burst table).

A success's line is DEBUG (`-v 2`): at the default `-v 1` a draining worker would spend
about half its time formatting and writing one line per job (docs/benchmarks.md, "Fast by
default"), so `-v 1` has the periodic summary (StatusReportService) for successes, and a line for
each job that did not succeed (retried, snoozed, dead, cancelled at INFO; lost at WARNING)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.core.management.base import OutputWrapper
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from ..jobs import Job
from .worker_stats import OUTCOMES, WorkerStats

logger = logging.getLogger("django_alkqueue")

#: The line of a finished job: queue, id, outcome, milliseconds since its handler started.
#: DEBUG for a success (SUCCESS_LEVEL), INFO for any other outcome.
FINISHED_LINE = "%s job %s %s in %.1f ms"
#: The level of a success's FINISHED_LINE: `-v 2` shows it, the default `-v 1` does not.
SUCCESS_LEVEL = logging.DEBUG
SUMMARY_INTERVAL = 10.0
LIVE_INTERVAL = 1.0
#: The `extra` fields of every record the worker logs about one job, so that a JSON formatter
#: shows them (docs/operations.md, "Logs"); None where a record has no value for one.
JOB_FIELDS = ("queue", "job_id", "attempt", "worker_id", "duration_ms", "outcome")


def job_fields(
    job: Job, outcome: str | None = None, duration_ms: float | None = None
) -> dict[str, Any]:
    """The JOB_FIELDS of a record about `job`: its attempt is the one that ran, its worker
    the one that claimed it."""
    return {
        "queue": job.queue,
        "job_id": job.id,
        "attempt": job.attempts,
        "worker_id": job.claimed_by,
        "duration_ms": None if duration_ms is None else round(duration_ms, 1),
        "outcome": outcome,
    }


class JobFieldDefaults(logging.Filter):
    """Gives every record of the worker's logger the JOB_FIELDS, None where the call passed
    none, so that a JSON formatter's output has the same keys on every line (a record about
    the worker itself, a leader change, a start-up line) and a format string naming
    %(job_id)s never fails."""

    def filter(self, record: logging.LogRecord) -> bool:
        for field in JOB_FIELDS:  # as Logger.makeRecord writes `extra` into the record
            record.__dict__.setdefault(field, None)
        return True


def default_job_fields(into: logging.Logger = logger) -> None:
    """Install JobFieldDefaults on the worker's logger, once however often called."""
    if not any(isinstance(f, JobFieldDefaults) for f in into.filters):
        into.addFilter(JobFieldDefaults())


#: The outcomes as the --burst table's header shows them.
OUTCOME_LABELS = {
    "succeeded": pgettext_lazy("outcome", "succeeded"),
    "retried": pgettext_lazy("outcome", "retried"),
    "snoozed": pgettext_lazy("outcome", "snoozed"),
    "dead": pgettext_lazy("outcome", "dead"),
    "lost": pgettext_lazy("outcome", "lost"),
    "cancelled": pgettext_lazy("outcome", "cancelled"),
}


class Stream(Protocol):
    def write(self, text: str, /) -> Any: ...
    def flush(self) -> Any: ...
    def isatty(self) -> bool: ...


#: The most jobs per queue of one ack batch whose times are read: in a larger batch every
#: k-th job's times stand for k jobs, so a draining worker pays for at most this many.
TIMED_PER_BATCH = 32


def wait_and_run(job: Job, started: float, now: float, wall: float) -> tuple[float, float]:
    """The job's wait (from its run_at, when it was due, to its handler's start) and run
    (from that start to `now`) in seconds; `now` is monotonic, `wall` the epoch time."""
    run = now - started
    if job.run_at is None:  # never so for a claimed job: a waiting one is not due
        return 0.0, run
    return max(wall - run - job.run_at.timestamp(), 0.0), run


def sampled_times(
    pairs: Sequence[tuple[Job, float]], now: float, wall: float
) -> list[tuple[float, float, int]]:
    """(wait, run, jobs it stands for) of at most TIMED_PER_BATCH evenly spaced jobs of one
    queue's batch; the weights add up to the batch's size."""
    step = -(-len(pairs) // TIMED_PER_BATCH)
    chosen = pairs[::step]
    weights = [step] * (len(chosen) - 1) + [len(pairs) - step * (len(chosen) - 1)]
    return [
        (*wait_and_run(job, started, now, wall), weight)
        for (job, started), weight in zip(chosen, weights, strict=True)
    ]


def report_outcome(
    stats: WorkerStats, job: Job, outcome: str, started: float, error: str | None = None
) -> None:
    """Count the outcome and its times and log one line for the job (cheap when its level is
    off), ending with `error`, the headline of the error it retried or died of
    (error_text.logged_line)."""
    times = wait_and_run(job, started, time.monotonic(), time.time())
    stats.record(job.queue, outcome, times=[(*times, 1)])
    level = SUCCESS_LEVEL if outcome == "succeeded" else logging.INFO
    if outcome != "lost" and not logger.isEnabledFor(level):
        return
    elapsed = (time.monotonic() - started) * 1000
    fields = job_fields(job, outcome, elapsed)
    if outcome == "lost":
        logger.warning("%s job %s: claim lost (lease lapsed or job taken); result discarded",
                       job.queue, job.id, extra=fields)  # fmt: skip
    elif error:
        logger.log(level, FINISHED_LINE + ": %s", job.queue, job.id, outcome, elapsed, error,
                   extra=fields)  # fmt: skip
    else:
        logger.log(level, FINISHED_LINE, job.queue, job.id, outcome, elapsed, extra=fields)


def report_successes(stats: WorkerStats, finished: Sequence[tuple[Job, float]]) -> None:
    """report_outcome(..., "succeeded", ...) for the jobs of one ack batch (each with the
    monotonic time its handler started): one count per queue, not a lock per job."""
    now, wall = time.monotonic(), time.time()
    by_queue: dict[str, list[tuple[Job, float]]] = {}
    for pair in finished:
        by_queue.setdefault(pair[0].queue, []).append(pair)
    for queue, pairs in by_queue.items():
        stats.record(queue, "succeeded", len(pairs), sampled_times(pairs, now, wall))
    if logger.isEnabledFor(SUCCESS_LEVEL):
        now = time.monotonic()
        for job, started in finished:
            elapsed = (now - started) * 1000
            logger.log(SUCCESS_LEVEL, FINISHED_LINE, job.queue, job.id, "succeeded", elapsed,
                       extra=job_fields(job, "succeeded", elapsed))  # fmt: skip


def summary_line(stats: WorkerStats, in_flight: int, depth: int) -> str:
    """`processed` counts every finished attempt but the snoozed ones (a snooze puts the job
    back, refunded: counted apart as `snoozed`); `failed` those that raised (retried or
    dead-lettered, WorkerStats.failed); `dead` those dead-lettered; the rate is of the
    processed. In the active language: the live status line is for a person (the logged
    summary is English, StatusReportService)."""
    totals = stats.totals()
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    processed = stats.finished() - totals["snoozed"]
    text = _(
        "processed %(processed)d, failed %(failed)d, dead %(dead)d, snoozed %(snoozed)d, "
        "%(rate).1f jobs/s, in flight %(in_flight)d, depth %(depth)d"
    )
    return text % {
        "processed": processed,
        "failed": stats.failed(),
        "dead": totals["dead"],
        "snoozed": totals["snoozed"],
        "rate": processed / elapsed,
        "in_flight": in_flight,
        "depth": depth,
    }


def write_raw(stream: Stream, text: str) -> None:
    """Write `text` as it is: Django's OutputWrapper (a command's self.stdout) would end it
    with a newline, which breaks a status line meant to be rewritten in place."""
    if isinstance(stream, OutputWrapper):
        stream.write(text, ending="")
    else:
        stream.write(text)
    stream.flush()


def burst_table(stats: WorkerStats, depths: dict[str, int]) -> str:
    """The per-queue table printed when a --burst worker exits."""
    rows = stats.snapshot()
    queues = sorted(set(rows) | set(depths))
    header = (_("queue"), *(str(OUTCOME_LABELS[o]) for o in OUTCOMES), _("left"))
    body = [
        (q, *(str(rows.get(q, {}).get(o, 0)) for o in OUTCOMES), str(depths.get(q, 0)))
        for q in queues
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                         enumerate(zip(cells, widths, strict=True)))  # fmt: skip

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, body)])


def report_shutdown(
    stats: WorkerStats, depths: dict[str, int], stream: Stream, burst: bool, worker_id: str
) -> None:
    """The worker's last words: the per-queue table of what it did. With --burst it is the
    run's result, on `stream` (stdout). A worker stopped by a signal logs it, in English like
    every log line, so that a service's journal ends with it as a terminal does."""
    if burst:
        stream.write(burst_table(stats, depths) + "\n")
        return
    with translation.override(None):
        line = summary_line(stats, 0, sum(depths.values()))
        table = burst_table(stats, depths)
    logger.info("worker %s stopped: %s\n%s", worker_id, line, table)


class StatusReportService:
    """Every 10 s a summary line through logging; on a TTY a live status line, rewritten in
    place every second, instead."""

    name = "alk-status"

    def __init__(
        self,
        stats: WorkerStats,
        in_flight: Callable[[], int],
        depth: Callable[[], int],
        stream: Stream = sys.stdout,
    ) -> None:
        self.stats = stats
        self.in_flight = in_flight
        self.depth = depth
        self.stream = stream
        self.live = stream.isatty()

    @property
    def interval(self) -> float:
        return LIVE_INTERVAL if self.live else SUMMARY_INTERVAL

    def run_once(self, now: datetime) -> str:
        """Report once; returns the line."""
        if self.live:
            line = summary_line(self.stats, self.in_flight(), self.depth())
            write_raw(self.stream, "\r\x1b[K" + line)  # back to the start, clear, rewrite
        else:
            with translation.override(None):  # logs are for machines and grep: English
                line = summary_line(self.stats, self.in_flight(), self.depth())
            logger.info("%s", line)
        return line

    def finish(self) -> None:
        """What follows the live line starts on a line of its own."""
        if self.live:
            write_raw(self.stream, "\n")
