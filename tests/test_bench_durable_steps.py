"""bench/durable_steps.py runs in --quick at tiny sizes against the test run's database and
prints its three figures (docs/benchmarks.md, "Durable steps")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.workers import ROOT, database_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_durable_steps_bench_runs_in_quick():
    env = database_env()
    url = env["DATABASE_URL"] or f"sqlite:///{env['ALKQUEUE_SQLITE_NAME']}"
    env.pop("DJANGO_SETTINGS_MODULE")
    result = subprocess.run(
        [sys.executable, "-m", "bench.durable_steps", "--quick", "--url", url, "--jobs", "3"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout[result.stdout.index("{") :])
    assert figures["steps against raw"]["steps/s"] > 0
    assert figures["signal"]["repetitions"] == 3
    assert figures["sleeping drain"]["jobs"] == 3
