"""`manage.py alk_jobs`, run as a subprocess against the test run's database: list and show
(tables for people, JSON for scripts, sensitive payloads and keys masked, control characters
escaped), retry/requeue, cancel, purge, pause, resume and limits through the admin's
operations, each written to the admin's log with the OS user and host; exit 0 done, 1
nothing matched, 2 bad usage (docs/operations.md, "alk_jobs")."""

from __future__ import annotations

import getpass
import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.audit import COMMAND_USER
from django_alkqueue.error_groups import fingerprint
from django_alkqueue.models import CancelRequest, Consumer, DeadLetter, QueueMessage
from tests.admin_helpers import dead_lettered
from tests.workers import ROOT, database_env

# Committed rows: the command is another process.
pytestmark = pytest.mark.django_db(transaction=True)

SMTP = "SMTPServerDisconnected: Connection unexpectedly closed\n\nTraceback (most recent ...)"
TIMEOUT = "TimeoutError: the API took 30 s\n\nTraceback (most recent call last): ..."


def alk_jobs(
    *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """The command's run; its stdin is not a terminal unless given one."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "alk_jobs", *args],
        env=database_env(), stdin=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def ok(*args: str) -> str:
    result = alk_jobs(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def listed(*args: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(ok("list", "--json", *args))
    return rows


def consumer(name: str, **fields: object) -> Consumer:
    return Consumer.objects.create(queue=name, handler="shop.consumers.h", lease=30,
                                   max_attempts=3, **fields)  # fmt: skip


def last_log() -> LogEntry:
    entry = LogEntry.objects.order_by("-id").first()
    assert entry is not None
    return entry


def who() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()} via alk_jobs"


# -- list ------------------------------------------------------------------------------------


def test_list_prints_the_newest_live_jobs_and_dead_letters_in_one_table():
    older = queue("emails").enqueue({"to": "a@example.com"})
    dead = dead_lettered("emails", {"to": "b@example.com"}, SMTP)
    newer = queue("reports").enqueue({"day": 1}, concurrency_key="customer-7")

    out = ok("list")

    lines = out.splitlines()
    assert lines[0].split() == ["job", "queue", "state", "attempts", "age", "run", "at", "/",
                                "died", "key", "error"]  # fmt: skip
    assert [line.split()[:3] for line in lines[2:]] == [
        [str(newer.id), "reports", "pending"],
        [str(dead), "emails", "dead"],
        [str(older.id), "emails", "pending"],
    ]
    assert "customer-7" in lines[2]
    assert lines[3].endswith("SMTPServerDisconnected: Connection unexpectedly closed")


def test_list_json_is_one_object_per_job_for_scripts():
    dead = dead_lettered("emails", {"to": "b@example.com"}, SMTP)

    (row,) = listed("--state", "dead")

    assert row["id"] == dead and row["queue"] == "emails" and row["state"] == "dead"
    assert row["error"] == "SMTPServerDisconnected: Connection unexpectedly closed"
    assert row["error_group"] == fingerprint(SMTP)
    assert row["payload"] == {"to": "b@example.com"} and row["reason"] == "failed"
    assert str(row["died_at"]).endswith("+00:00")


def test_list_filters_by_queue_and_state():
    queue("emails").enqueue({})
    scheduled = queue("emails").enqueue({}, delay=3600)
    queue("reports").enqueue({}, delay=3600)
    assert [r["id"] for r in listed("--queue", "emails", "--state", "scheduled")] == [scheduled.id]


def test_list_filters_by_text_of_the_error():
    dead_lettered("emails", {}, SMTP)
    timed_out = dead_lettered("emails", {}, TIMEOUT)
    assert [r["id"] for r in listed("--error", "took 30")] == [timed_out]


def test_list_filters_by_error_group():
    smtp = [dead_lettered("emails", {"n": n}, SMTP) for n in range(2)]
    dead_lettered("emails", {}, TIMEOUT)
    found = listed("--error", fingerprint(SMTP))
    assert sorted(r["id"] for r in found) == smtp


def test_list_filters_by_age():
    old = queue("emails").enqueue({})
    QueueMessage.objects.filter(id=old.id).update(enqueued_at=timezone.now() - timedelta(hours=2))
    queue("emails").enqueue({})
    assert [r["id"] for r in listed("--older-than", "3600")] == [old.id]


def test_older_than_takes_minutes_hours_and_days():
    old = queue("emails").enqueue({})
    QueueMessage.objects.filter(id=old.id).update(enqueued_at=timezone.now() - timedelta(hours=2))
    queue("emails").enqueue({})
    assert [r["id"] for r in listed("--older-than", "90m")] == [old.id]
    assert alk_jobs("list", "--older-than", "1d").returncode == 1  # nothing that old


def test_list_filters_by_unique_or_concurrency_key():
    keyed = queue("emails").enqueue({}, concurrency_key="customer-7")
    unique = queue("emails").enqueue({}, unique_key="customer-7")
    queue("emails").enqueue({}, concurrency_key="customer-8")
    assert sorted(r["id"] for r in listed("--key", "customer-7")) == [keyed.id, unique.id]


def test_list_stops_at_the_limit():
    jobs = queue("emails").enqueue_many([{}] * 5)
    assert [r["id"] for r in listed("--limit", "2")] == [jobs[4].id, jobs[3].id]


def test_a_list_that_matches_nothing_says_so_and_exits_1():
    queue("emails").enqueue({})

    result = alk_jobs("list", "--queue", "emals")

    assert result.returncode == 1
    assert result.stdout.strip() == "no job matches"


def test_a_sensitive_queues_payload_and_keys_are_masked_unless_show_payload():
    consumer("patients", sensitive=True)
    queue("patients").enqueue({"name": "Ada"}, concurrency_key="ada@example.com")

    (masked,) = listed("--queue", "patients")
    (shown,) = listed("--queue", "patients", "--show-payload")

    assert masked["payload"] == {"name": "***"} and masked["concurrency_key"] == "***"
    assert shown["payload"] == {"name": "Ada"} and shown["concurrency_key"] == "ada@example.com"
    assert "ada@example.com" not in ok("list")


def test_key_finds_no_job_of_a_sensitive_queue_unless_show_payload():
    consumer("patients", sensitive=True)
    job = queue("patients").enqueue({}, concurrency_key="ada@example.com")

    assert alk_jobs("list", "--key", "ada@example.com").returncode == 1
    assert [r["id"] for r in listed("--key", "ada@example.com", "--show-payload")] == [job.id]


def test_the_table_escapes_control_characters():
    queue("emails").enqueue({}, concurrency_key="k\x1b]0;owned\x07\nfake row")

    out = ok("list")

    assert "\x1b" not in out and "\x07" not in out
    assert "k\\x1b]0;owned\\x07\\nfake row" in out
    assert len(out.strip().splitlines()) == 3


def test_an_unknown_state_is_bad_usage_exit_2():
    result = alk_jobs("list", "--state", "running")
    assert result.returncode == 2
    assert "invalid choice: 'running'" in result.stderr


# -- show ------------------------------------------------------------------------------------


def test_show_prints_the_job_its_payload_and_its_whole_error():
    dead = dead_lettered("emails", {"to": "b@example.com"}, SMTP)

    out = ok("show", str(dead))

    lines = out.splitlines()
    assert lines[0].split() == ["job", str(dead)] and ["state", "dead"] in map(str.split, lines)
    assert ["error", "group", fingerprint(SMTP)] in map(str.split, lines)
    assert '"to": "b@example.com"' in out
    assert "  Traceback (most recent ...)" in out


def test_show_json_has_every_field():
    job = queue("emails").enqueue({"to": "a@example.com"}, priority=3)

    data = json.loads(ok("show", str(job.id), "--json"))

    assert data["id"] == job.id and data["state"] == "pending" and data["priority"] == 3
    assert data["payload"] == {"to": "a@example.com"} and data["error_group"] is None


def test_show_masks_a_sensitive_queues_payload_unless_asked():
    consumer("patients", sensitive=True)
    job = queue("patients").enqueue({"name": "Ada"})
    assert json.loads(ok("show", str(job.id), "--json"))["payload"] == {"name": "***"}
    shown = json.loads(ok("show", str(job.id), "--json", "--show-payload"))
    assert shown["payload"] == {"name": "Ada"}


def dead_lettered_with_key(name: str, key: str) -> int:
    """A job of `name` with fair key `key`, failed: a dead letter now; its job id."""
    job = queue(name).enqueue({}, priority=100, fair_key=key)  # claimed first
    handle = queue(name).claim_one("w-dead")
    assert handle is not None and handle.job.id == job.id and handle.fail(SMTP)
    return job.id


def test_show_prints_the_fair_key_of_a_dead_letter_and_of_a_live_job():
    dead = dead_lettered_with_key("tenants", "acme")
    live = queue("tenants").enqueue({}, fair_key="globex")

    assert ["fair", "key", "acme"] in map(str.split, ok("show", str(dead)).splitlines())
    assert json.loads(ok("show", str(live.id), "--json"))["fair_key"] == "globex"


def test_show_and_list_mask_a_sensitive_queues_fair_key_unless_asked():
    consumer("patients", sensitive=True)
    dead = dead_lettered_with_key("patients", "ada@example.com")

    assert json.loads(ok("show", str(dead), "--json"))["fair_key"] == "***"
    assert [row["fair_key"] for row in listed("--queue", "patients")] == ["***"]
    shown = listed("--queue", "patients", "--show-payload")
    assert [row["fair_key"] for row in shown] == ["ada@example.com"]


def test_show_of_a_job_that_is_nowhere_exits_1():
    result = alk_jobs("show", "424242")
    assert result.returncode == 1
    assert result.stdout.strip() == "no job 424242: not live, not a dead letter, not kept"


# -- retry / requeue -------------------------------------------------------------------------


def test_retry_by_id_requeues_the_dead_letter_under_its_id_and_says_so():
    dead = dead_lettered("emails", {"to": "b@example.com"}, SMTP)

    out = ok("retry", str(dead))

    assert out.strip() == f"requeued 1 dead letter: job {dead}"
    assert not DeadLetter.objects.filter(job_id=dead).exists()
    assert QueueMessage.objects.get(id=dead).attempts == 0


def test_retry_gives_the_job_its_fair_key_back():
    dead = dead_lettered_with_key("tenants", "acme")
    ok("retry", str(dead))
    assert QueueMessage.objects.get(id=dead).fair_key == "acme"


def test_requeue_is_another_name_for_retry():
    dead = dead_lettered("emails", {}, SMTP)
    assert ok("requeue", str(dead)).strip() == f"requeued 1 dead letter: job {dead}"


def test_retry_by_error_group_requeues_that_group_only():
    smtp = [dead_lettered("emails", {"n": n}, SMTP) for n in range(3)]
    other = dead_lettered("emails", {}, TIMEOUT)

    out = ok("retry", "--error", fingerprint(SMTP))

    assert out.strip() == f"requeued 3 dead letters: jobs {', '.join(map(str, smtp))}"
    assert list(DeadLetter.objects.values_list("job_id", flat=True)) == [other]


def test_retry_by_queue_requeues_that_queues_dead_letters():
    emails = dead_lettered("emails", {}, SMTP)
    reports = dead_lettered("reports", {}, SMTP)
    assert json.loads(ok("retry", "--queue", "emails", "--json"))["requeued"] == [emails]
    assert list(DeadLetter.objects.values_list("job_id", flat=True)) == [reports]


def test_retry_writes_the_admins_requeue_entry_with_the_os_user_and_host():
    dead = dead_lettered("emails", {}, SMTP)
    pk = DeadLetter.objects.get(job_id=dead).pk

    ok("retry", str(dead))

    entry = last_log()
    assert entry.content_type.model_class() is DeadLetter and entry.action_flag == CHANGE
    assert entry.change_message == f"requeue: 1 dead letter; ids {pk} -> jobs {dead}. By {who()}"
    assert entry.user.get_username() == COMMAND_USER and not entry.user.is_active


def test_the_job_page_says_who_requeued_it_with_the_command():
    from tests.admin_helpers import JOBS, client_for, make_user

    dead = dead_lettered("emails", {}, SMTP)
    pk = DeadLetter.objects.get(job_id=dead).pk
    ok("retry", str(dead))

    page = client_for(make_user("root", superuser=True)).get(f"{JOBS}{dead}/change/")

    assert f"dead letter #{pk} on " in page.content.decode()
    assert f"by {who()}" in page.content.decode()


def test_retry_without_ids_or_a_filter_is_bad_usage_and_requeues_nothing():
    dead_lettered("emails", {}, SMTP)

    result = alk_jobs("retry")

    assert result.returncode == 2
    assert result.stderr.strip() == "name the jobs: give ids, or a filter (--queue, --error, ...)"
    assert DeadLetter.objects.count() == 1


def test_retry_that_matches_nothing_changes_nothing_says_so_and_exits_1():
    dead_lettered("emails", {}, SMTP)
    entries = LogEntry.objects.count()

    result = alk_jobs("retry", "--queue", "reports")

    assert result.returncode == 1
    assert result.stdout.strip() == "no dead letter matches"
    assert DeadLetter.objects.count() == 1 and LogEntry.objects.count() == entries


def test_a_dead_letter_whose_unique_key_a_live_job_holds_is_kept_and_exits_1():
    dead = queue("emails").enqueue({}, unique_key="order-1", priority=10)
    queue("emails").claim_one("w").fail("boom")
    holder = queue("emails").enqueue({}, unique_key="order-1")

    result = alk_jobs("retry", str(dead.id))

    assert result.returncode == 1
    assert result.stdout.strip() == (
        f"kept 1: a live job holds its unique key: job {dead.id} (held by job {holder.id})"
    )


# -- cancel ------------------------------------------------------------------------------------


def test_cancel_by_filter_cancels_the_matching_live_jobs_and_logs_them():
    jobs = queue("emails").enqueue_many([{}] * 3)
    kept = queue("reports").enqueue({})

    out = ok("cancel", "--queue", "emails")

    ids = [job.id for job in jobs]
    assert out.strip() == f"cancelled 3 jobs: {', '.join(map(str, ids))}"
    assert list(QueueMessage.objects.values_list("id", flat=True)) == [kept.id]
    entry = last_log()
    assert entry.action_flag == DELETION
    assert entry.change_message == f"cancel: 3 jobs; ids {', '.join(map(str, ids))}. By {who()}"


def test_cancel_of_a_claimed_job_leaves_a_cancel_request_for_its_worker():
    job = queue("emails").enqueue({})
    queue("emails").claim_one("w-7")

    ok("cancel", str(job.id))

    request = CancelRequest.objects.get(job_id=job.id)
    assert request.worker_id == "w-7" and request.queue == "emails"


def test_cancel_by_state_leaves_the_other_states():
    due = queue("emails").enqueue({})
    later = queue("emails").enqueue({}, delay=3600)
    assert json.loads(ok("cancel", "--state", "scheduled", "--json")) == {"cancelled": [later.id]}
    assert list(QueueMessage.objects.values_list("id", flat=True)) == [due.id]


def test_a_cancel_that_matches_nothing_exits_1():
    queue("emails").enqueue({})
    result = alk_jobs("cancel", "--queue", "reports")
    assert result.returncode == 1 and result.stdout.strip() == "no live job matches"
    assert QueueMessage.objects.count() == 1


# -- purge -------------------------------------------------------------------------------------


def test_purge_without_yes_and_without_a_terminal_refuses_with_exit_2():
    queue("emails").enqueue_many([{}] * 2)

    result = alk_jobs("purge", "--queue", "emails")

    assert result.returncode == 2
    assert "stdin is not a terminal: give --yes" in result.stderr
    assert QueueMessage.objects.count() == 2


def test_purge_yes_deletes_the_queues_pending_jobs_only_and_logs_it():
    queue("emails").enqueue_many([{}] * 3)
    later = queue("emails").enqueue({}, delay=3600)
    other = queue("reports").enqueue({})

    out = ok("purge", "--queue", "emails", "--yes")

    assert out.strip() == "purged 3 pending jobs of queue emails"
    assert sorted(QueueMessage.objects.values_list("id", flat=True)) == [later.id, other.id]
    assert last_log().change_message == f"purge: 3 jobs. queue emails, pending. By {who()}"


def test_purge_of_the_dead_letters():
    dead_lettered("emails", {}, SMTP)
    assert ok("purge", "--queue", "emails", "--state", "dead", "--yes").strip() == (
        "purged 1 dead job of queue emails"
    )
    assert not DeadLetter.objects.exists()


def test_a_purge_with_nothing_to_purge_exits_1_without_asking():
    result = alk_jobs("purge", "--queue", "emails")
    assert result.returncode == 1
    assert result.stdout.strip() == "nothing to purge: no pending job in emails"


def purge_on_a_terminal(answer: str) -> tuple[int, str]:
    """`purge --queue emails` with a terminal as stdin, answering its question."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "alk_jobs", "purge", "--queue", "emails"],
        env=database_env(), stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    assert process.stdout is not None
    asked = ""
    deadline = time.monotonic() + 60
    while "[y/N]" not in asked and time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1)
        if ready:
            asked += os.read(process.stdout.fileno(), 1024).decode()
    os.write(leader, f"{answer}\n".encode())
    rest, _ = process.communicate(timeout=60)
    os.close(leader)
    return process.returncode, asked + rest


def test_purge_on_a_terminal_asks_and_no_keeps_the_jobs():
    queue("emails").enqueue_many([{}] * 2)

    code, out = purge_on_a_terminal("n")

    assert out.startswith("Purge 2 pending (emails)? They cannot be brought back. [y/N] ")
    assert code == 1 and "nothing purged" in out
    assert QueueMessage.objects.count() == 2


def test_purge_on_a_terminal_asks_and_yes_purges():
    queue("emails").enqueue_many([{}] * 2)

    code, out = purge_on_a_terminal("y")

    assert code == 0 and "purged 2 pending jobs of queue emails" in out
    assert not QueueMessage.objects.exists()


# -- pause, resume, limits ---------------------------------------------------------------------


def test_pause_and_resume_set_the_queues_flag_and_log_it():
    row = consumer("emails")

    assert ok("pause", "--queue", "emails").strip() == (
        "paused emails: workers stop claiming from it within one poll interval"
    )
    assert Consumer.objects.get(queue="emails").paused
    logged = f"pause: 1 consumer; ids {row.pk}. queues emails. By {who()}"
    assert last_log().change_message == logged
    ok("resume", "--queue", "emails")
    assert not Consumer.objects.get(queue="emails").paused


def test_the_queues_of_pause_resume_and_purge_may_be_named_after_the_subcommand():
    consumer("emails")
    consumer("reports")
    ok("pause", "emails", "reports")
    assert list(Consumer.objects.filter(paused=True).values_list("queue", flat=True)) == [
        "emails", "reports",
    ]  # fmt: skip
    queue("emails").enqueue({})
    assert ok("purge", "emails", "--yes").strip() == "purged 1 pending job of queue emails"


def test_pause_without_a_queue_is_bad_usage():
    result = alk_jobs("pause")
    assert result.returncode == 2
    assert result.stderr.strip() == "name the queues: after the subcommand, or with --queue"


def test_pausing_a_queue_without_a_consumer_row_exits_1():
    result = alk_jobs("pause", "--queue", "emals")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "no Consumer row for emals: a worker writes it when it first serves the queue"
    )


def test_limits_sets_overrides_as_set_limits_does_and_prints_those_in_force():
    consumer("emails")

    out = ok("limits", "--queue", "emails", "--concurrency", "4", "--rate", "10/s")

    row = Consumer.objects.get(queue="emails")
    assert row.limit_overrides == {"concurrency": 4, "rate": [10, 1.0]}
    assert out.splitlines()[2].split() == ["emails", "4", "(override)", "-", "10/s", "(override)",
                                           "-"]  # fmt: skip
    logged = last_log().change_message
    assert logged.endswith(f"queues emails: concurrency=4, rate=10/s. By {who()}")


def test_limits_none_is_the_override_no_limit_and_reset_drops_it():
    consumer("emails", code_limits={"concurrency": 8})
    ok("limits", "--queue", "emails", "--concurrency", "none")
    assert Consumer.objects.get(queue="emails").limit_overrides == {"concurrency": None}
    ok("limits", "--queue", "emails", "--reset")
    assert Consumer.objects.get(queue="emails").limit_overrides == {}


def test_limits_reads_every_queues_limits_in_force():
    consumer("emails", code_limits={"concurrency": 8})
    consumer("reports")
    data = json.loads(ok("limits", "--json"))
    assert data["emails"] == {
        "limits": {"concurrency": "8", "key_concurrency": None, "rate": None, "key_rate": None},
        "sources": {"concurrency": "code"},
    }
    assert data["reports"]["sources"] == {}


def test_a_bad_limit_is_bad_usage_and_writes_nothing():
    consumer("emails")
    result = alk_jobs("limits", "--queue", "emails", "--rate", "10 per second")
    assert result.returncode == 2 and "rate must be written" in result.stderr
    assert Consumer.objects.get(queue="emails").limit_overrides == {}
