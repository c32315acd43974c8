"""What a worker prints: the summary line's words, the live status line rewritten in place
on a TTY (also through a management command's stdout), and a --burst worker's reports."""

from __future__ import annotations

import io
import logging
import os
import pty
import select
import subprocess
import time

import pytest
from django.core.management.base import OutputWrapper

from django_alkqueue import Job, queue
from django_alkqueue.clock import system_clock
from django_alkqueue.jobs import make_job
from django_alkqueue.reports.worker_report import (
    StatusReportService,
    report_outcome,
    report_successes,
    summary_line,
)
from django_alkqueue.reports.worker_stats import WorkerStats
from tests.workers import database_env, worker_command


class Terminal(io.StringIO):
    """A stream that says it is a TTY, as a worker's stdout in a terminal does."""

    def isatty(self) -> bool:
        return True


def stats_of(*outcomes: str) -> WorkerStats:
    stats = WorkerStats()
    for outcome in outcomes:
        stats.record("shop-emails", outcome)
    return stats


def test_the_summary_line_names_processed_failed_and_dead():
    stats = stats_of("succeeded", "succeeded", "retried", "retried", "dead")

    line = summary_line(stats, in_flight=3, depth=6)

    assert line.startswith("processed 5, failed 3, dead 1, ")
    assert line.endswith(" jobs/s, in flight 3, depth 6")


def finished(queue_name: str, job_id: int, started: float) -> tuple[Job, float]:
    fields = {"queue": queue_name, "id": job_id, "attempts": 1, "claimed_by": "w1",
              "run_at": system_clock()}  # fmt: skip
    return make_job(fields), started


def test_an_ack_batch_counts_its_successes_per_queue():
    stats = stats_of("succeeded")
    started = time.monotonic()
    batch = [finished("shop-emails", 1, started), finished("shop-emails", 2, started),
             finished("shop-reports", 3, started)]  # fmt: skip

    report_successes(stats, batch)

    assert stats.snapshot()["shop-emails"]["succeeded"] == 3
    assert stats.snapshot()["shop-reports"]["succeeded"] == 1


def test_each_job_of_an_ack_batch_logs_its_line_at_debug(caplog):
    started = time.monotonic()
    caplog.set_level(logging.DEBUG, logger="django_alkqueue")

    report_successes(WorkerStats(), [finished("shop-emails", 7, started),
                                     finished("shop-reports", 8, started)])  # fmt: skip

    lines = [r.getMessage().rsplit(" in ", 1)[0] for r in caplog.records]
    assert lines == ["shop-emails job 7 succeeded", "shop-reports job 8 succeeded"]
    assert all(r.getMessage().endswith(" ms") for r in caplog.records)


def test_at_info_an_ack_batch_logs_no_line_per_success(caplog):
    caplog.set_level(logging.INFO, logger="django_alkqueue")

    report_successes(WorkerStats(), [finished("shop-emails", 7, time.monotonic())])

    assert caplog.records == []


def test_at_info_a_job_that_did_not_succeed_still_logs_its_line(caplog):
    caplog.set_level(logging.INFO, logger="django_alkqueue")
    job, started = finished("shop-emails", 7, time.monotonic())

    report_outcome(WorkerStats(), job, "retried", started)

    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith("shop-emails job 7 retried in ")


def test_the_live_status_line_rewrites_one_line_through_a_commands_stdout():
    terminal = Terminal()
    reporter = StatusReportService(
        stats_of("succeeded"), lambda: 2, lambda: 7, OutputWrapper(terminal)
    )

    reporter.run_once(system_clock())
    reporter.run_once(system_clock())

    text = terminal.getvalue()
    assert "\n" not in text
    assert text.count("\r\x1b[Kprocessed 1, failed 0, dead 0, ") == 2


def read_terminal(fd: int, process: subprocess.Popen[bytes], timeout: float) -> str:
    """Everything written to the pseudo-terminal until the process ends."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        elif process.poll() is not None:
            break
    return b"".join(chunks).decode()


@pytest.mark.django_db(transaction=True)
def test_a_burst_worker_on_a_tty_rewrites_its_status_line_then_prints_its_table():
    queue("shop-reports").enqueue({"sleep": 2.5})
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        worker_command("--queue", "shop-reports", "--burst"), env=database_env(),
        stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    try:
        screen = read_terminal(leader, process, timeout=60)
        assert process.wait(10) == 0, screen
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)

    lines = screen.replace("\r\n", "\n").split("\n")
    live = [line for line in lines if "\x1b[Kprocessed" in line]
    # The 2.5 s job spans two 1 s updates, written on one line, not one line each.
    assert len(live) == 1 and live[0].count("\x1b[Kprocessed") >= 2, repr(screen)
    assert any(line.startswith("queue ") and "succeeded" in line for line in lines), screen
