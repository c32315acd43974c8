"""What a real worker logs of its jobs: the line of a job that did not succeed carries its
error's type and first line (cut at 200 characters, withheld for a sensitive queue as its
stored error text is); the summary counts snoozed jobs apart; a process-pool child ended at
its time limit is said to be, not to have returned (docs/worker.md, "Output")."""

from __future__ import annotations

import re

import pytest

from django_alkqueue import queue
from django_alkqueue.error_text import WITHHELD
from tests.conftest import RUNNING_CONSUMERS
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)

LOGGING = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.logging_consumers"}


def lines_of(output: str, pattern: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(pattern, line)]


def test_a_retried_and_a_dead_jobs_lines_give_the_exceptions_type_and_first_line():
    # The consumer's options, written out: this process does not import the consumer.
    job = queue("smtp-emails", max_attempts=2).enqueue({"to": "a@example.com"})

    output = run_worker("--queue", "smtp-emails", "--burst", env=LOGGING)

    error = "SMTPServerDisconnected: Connection unexpectedly closed"
    lines = lines_of(output, rf"^smtp-emails job {job.id} ")
    assert [re.sub(r" in [0-9.]+ ms:", ":", line) for line in lines] == [
        f"smtp-emails job {job.id} retried: {error}",
        f"smtp-emails job {job.id} dead: {error}",
    ], output


def test_the_error_on_the_line_is_its_first_line_cut_at_200_characters():
    job = queue("long-errors", max_attempts=1).enqueue({})

    output = run_worker("--queue", "long-errors", "--burst", env=LOGGING)

    (line,) = lines_of(output, rf"^long-errors job {job.id} dead ")
    assert line.split(" ms: ", 1)[1] == ("ValueError: " + "x" * 300)[:200]
    assert "the second line" not in output


def test_a_sensitive_queues_line_withholds_the_message_as_its_stored_error_does():
    job = queue("private-cards", max_attempts=2).enqueue({"email": "ada@example.com",
                                                          "card": "4111 1111"})  # fmt: skip

    output = run_worker("--queue", "private-cards", "--burst",
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"})  # fmt: skip

    lines = lines_of(output, rf"^private-cards job {job.id} ")
    assert [line.split(" ms: ", 1)[1] for line in lines] == [f"ValueError {WITHHELD}"] * 2, output
    assert "4111" not in output and "ada@example.com" not in output


def test_a_fail_reason_ends_the_dead_jobs_line():
    job = queue("private-fail").enqueue({})

    output = run_worker("--queue", "private-fail", "--burst",
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.sensitive_consumers"})  # fmt: skip

    (line,) = lines_of(output, rf"^private-fail job {job.id} ")
    assert line.endswith(" ms: Fail: card refused by the bank"), output


def test_the_summary_counts_snoozed_jobs_apart_from_the_processed_ones():
    queue("snoozing").enqueue_many([{"snooze": 600}, {"snooze": 600}, {}])

    output = run_worker("--queue", "snoozing", "--max-jobs", "3", "--worker-id", "sum-1",
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.snoozing_consumers"})  # fmt: skip

    (stopped,) = lines_of(output, r"^worker sum-1 stopped: ")
    assert stopped.startswith("worker sum-1 stopped: processed 1, failed 0, dead 0, snoozed 2, ")


def test_a_process_pool_child_ended_at_its_time_limit_is_said_to_be_killed():
    job = queue("overrunning").enqueue({"sleep": 30})

    output = run_worker("--pool", "process", "--queue", "overrunning", "--max-jobs", "1",
                        "--kill-grace", "1", env=RUNNING_CONSUMERS)  # fmt: skip

    assert "returned after its time limit" not in output, output
    (killed,) = lines_of(output, rf"^overrunning job {job.id}: child \d+ ")
    assert re.fullmatch(rf"overrunning job {job.id}: child \d+ killed by SIGTERM past its time "
                        r"limit \(1 s\)", killed), output  # fmt: skip
    (retried,) = lines_of(output, rf"^overrunning job {job.id} retried ")
    assert retried.endswith(" ms: TimeLimitExceeded: ran longer than 1 s"), output
