"""`alk_status`: --json timestamps in ISO 8601, as JSON readers parse them; the text tables
leave out what is empty; --watch ends on Ctrl-C."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from datetime import datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import Worker
from tests.conftest import wait_until
from tests.workers import ROOT, Watched, database_env

pytestmark = pytest.mark.django_db


def test_json_timestamps_are_iso_8601():
    started = timezone.now().replace(microsecond=189404)
    Worker.objects.create(worker_id="web-1", hostname="web1", pid=25324, queues=["shop-emails"],
                          concurrency=4, started_at=started, last_heartbeat_at=started)  # fmt: skip
    out = io.StringIO()

    call_command("alk_status", "--json", stdout=out)

    (worker,) = json.loads(out.getvalue())["workers"]
    assert worker["started_at"] == started.isoformat()
    assert worker["last_heartbeat_at"] == started.isoformat()
    assert "T" in worker["started_at"]
    assert datetime.fromisoformat(worker["started_at"]) == started


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_ends_alk_status_watch_with_status_0_and_no_traceback():
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "alk_status", "--watch", "0.2"],
        env=database_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watched = Watched(process)
    wait_until(lambda: watched.output.count("no worker is registered") >= 2, 30,
               what="two refreshes")  # fmt: skip

    process.send_signal(signal.SIGINT)

    assert process.wait(30) == 0, watched.output
    assert "Traceback" not in watched.output


def test_the_text_table_shows_a_dash_for_the_oldest_age_of_a_queue_with_nothing_pending():
    queue("shop-emails").enqueue({}, delay=3600)  # scheduled only
    out = io.StringIO()

    call_command("alk_status", stdout=out)

    (row,) = [line.split() for line in out.getvalue().splitlines() if line.startswith("shop-")]
    assert row[:8] == ["shop-emails", "0", "1", "0", "0", "0", "0", "-"]


def test_the_text_output_says_no_worker_is_registered_instead_of_an_empty_table():
    out = io.StringIO()

    call_command("alk_status", stdout=out)

    assert "no worker is registered" in out.getvalue()
    assert "last heartbeat" not in out.getvalue()


def test_the_text_table_counts_waiting_jobs_apart_from_scheduled_ones():
    first = queue("shop-emails").enqueue({})
    queue("shop-emails").enqueue_many([{}, {}], after=[first])
    out = io.StringIO()

    call_command("alk_status", stdout=out)

    header = out.getvalue().splitlines()[0]
    assert header.split()[:7] == [
        "queue",
        "pending",
        "scheduled",
        "sleeping",
        "waiting",
        "claimed",
        "dead",
    ]
    (row,) = [line.split() for line in out.getvalue().splitlines() if line.startswith("shop-")]
    assert row[:7] == ["shop-emails", "1", "0", "0", "2", "0", "0"]


def test_json_counts_waiting_jobs_per_queue():
    first = queue("shop-emails").enqueue({})
    queue("shop-emails").enqueue({}, after=[first])
    out = io.StringIO()

    call_command("alk_status", "--json", stdout=out)

    (row,) = json.loads(out.getvalue())["queues"]
    assert (row["pending"], row["scheduled"], row["waiting"]) == (1, 0, 1)


# -- stored strings reach the terminal escaped ---------------------------------------------------

#: What a hostile handler or SQL session can store: a clear-screen and a title-setting escape
#: sequence, a newline starting a fake table row, a carriage return, a right-to-left override,
#: C1's CSI, and a backslash that would fake an escape.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07evil\nfake-row 0 0 0\r\u202eabc\x9b31m\\x1b"
ESCAPED = r"\x1b[2J\x1b]0;pwned\x07evil\nfake-row 0 0 0\r\u202eabc\x9b31m\\x1b"


def _assert_printable(output: str) -> None:
    """No character a terminal acts on, but the newlines between the lines, and no line the
    hostile text started."""
    import unicodedata

    acted_on = [ch for ch in output if ch != "\n" and unicodedata.category(ch)
                in {"Cc", "Cf", "Cs", "Zl", "Zp"}]  # fmt: skip
    assert acted_on == []
    assert not any(line.startswith("fake-row") for line in output.split("\n"))


def _status() -> str:
    out = io.StringIO()
    call_command("alk_status", stdout=out)
    return out.getvalue()


def test_alk_status_prints_a_workers_stored_strings_escaped():
    now = timezone.now()
    Worker.objects.create(worker_id=HOSTILE, hostname=HOSTILE, pid=1, queues=[HOSTILE],
                          concurrency=1, started_at=now, last_heartbeat_at=now)  # fmt: skip

    output = _status()

    _assert_printable(output)
    assert output.count(ESCAPED) == 3  # worker id, host name, queues


def test_alk_status_prints_a_concurrency_key_escaped_in_the_busiest_keys():
    from django_alkqueue.models import Consumer

    Consumer.objects.create(queue="keyed", handler="app.f", lease=30, max_attempts=3,
                            code_limits={"key_concurrency": 1})  # fmt: skip
    queue("keyed").enqueue({}, concurrency_key=HOSTILE)

    output = _status()

    _assert_printable(output)
    assert f"{ESCAPED} 0/1" in output


def test_alk_status_prints_a_progress_note_and_the_claiming_worker_escaped():
    from django_alkqueue.models import QueueMessage

    job = queue("reporting").enqueue({})
    assert queue("reporting").claim(HOSTILE.replace("\n", " "), 1)
    note = json.dumps({"done": 1, "total": 2, "note": HOSTILE})
    QueueMessage.objects.filter(id=job.id).update(progress=note, progress_at=timezone.now())

    output = _status()

    _assert_printable(output)
    assert ESCAPED in output
    assert ESCAPED.replace(r"\n", " ") in output  # the worker id


def test_printable_leaves_plain_text_alone_and_escapes_every_control_character():
    from django_alkqueue.management.commands._terminal import printable

    assert printable("shop-emails: 3 jobs, ü, 日本, a b") == "shop-emails: 3 jobs, ü, 日本, a b"
    assert printable("".join(map(chr, range(32)))) == "".join(
        {9: r"\t", 10: r"\n", 13: r"\r"}.get(code, f"\\x{code:02x}") for code in range(32)
    )
    assert printable("\x7f\x85\u2028\u2029\u200b\u2066") == r"\x7f\x85\u2028\u2029\u200b\u2066"
