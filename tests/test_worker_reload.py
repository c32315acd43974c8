"""`alk_worker --reload` (development): the worker restarts when a watched Python file
changes, and stops with the reloader on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from tests.conftest import wait_until
from tests.workers import ROOT, Watched, database_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_changed_consumers_module_restarts_the_worker_which_then_runs_jobs(tmp_path):
    module = tmp_path / "reload_probe.py"
    module.write_text("VERSION = 1\n")
    env = {
        **database_env(),
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "ALKQUEUE_EXTRA_CONSUMERS": "reload_probe",
    }
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "alk_worker", "--reload",
         "--queue", "shop-reports", "--poll-interval", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    watched = Watched(process)
    try:
        wait_until(lambda: watched.output.count("serving shop-reports") == 1, 60, what="start")
        time.sleep(1.5)  # the reloader's first snapshot of the files' times

        module.write_text("VERSION = 2\n")

        wait_until(lambda: watched.output.count("serving shop-reports") == 2, 60,
                   what="a second worker after the change")  # fmt: skip
        job = queue("shop-reports").enqueue({})
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), 30,
                   what="the restarted worker ran a job")  # fmt: skip
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(60)
    assert "Traceback" not in watched.output, watched.output
