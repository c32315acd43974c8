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
    assert row[:7] == ["shop-emails", "0", "1", "0", "0", "0", "-"]


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
    assert header.split()[:6] == ["queue", "pending", "scheduled", "waiting", "claimed", "dead"]
    (row,) = [line.split() for line in out.getvalue().splitlines() if line.startswith("shop-")]
    assert row[:6] == ["shop-emails", "1", "0", "2", "0", "0"]


def test_json_counts_waiting_jobs_per_queue():
    first = queue("shop-emails").enqueue({})
    queue("shop-emails").enqueue({}, after=[first])
    out = io.StringIO()

    call_command("alk_status", "--json", stdout=out)

    (row,) = json.loads(out.getvalue())["queues"]
    assert (row["pending"], row["scheduled"], row["waiting"]) == (1, 0, 1)
