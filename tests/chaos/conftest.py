from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from . import record
from .harness import Fleet

FAILURE = pytest.StashKey[str]()
#: Set it on a machine whose PostgreSQL others use at the same time: scenarios 3 and 4, which
#: restart the cluster, then skip.
NO_RESTARTS = "CHAOS_NO_CLUSTER_RESTARTS"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call" and report.failed:
        lines = [line for line in report.longreprtext.splitlines() if line.startswith("E ")]
        item.stash[FAILURE] = lines[0][1:].strip() if lines else "see the test output"
    return report


@pytest.fixture(autouse=True)
def records_of_failed_tests_say_so(request: pytest.FixtureRequest) -> Iterator[None]:
    """A scenario records its figures before its own last assertions: if one of those
    fails, its record must not say it passed."""
    written = len(record.WRITTEN)
    yield
    failure = request.node.stash.get(FAILURE, None)
    if failure is not None:
        for path in record.WRITTEN[written:]:
            record.mark_failed(path, failure)


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    """Start worker processes with fleet.start(...); every one left is SIGKILLed at teardown."""
    workers = Fleet()
    try:
        yield workers
    finally:
        workers.kill_all()
        print(workers.outputs())  # shown with a failure's captured output, hidden otherwise


def cluster_command(action: str) -> list[str]:
    """`pg_ctlcluster ... <action>` for the local cluster, or skip saying why it cannot run."""
    versions = sorted(os.listdir("/etc/postgresql")) if Path("/etc/postgresql").is_dir() else []
    if os.environ.get(NO_RESTARTS):
        pytest.skip(f"{NO_RESTARTS} is set: the local PostgreSQL cluster is shared")
    if os.geteuid() != 0:
        pytest.skip("needs root to restart and reconfigure the local PostgreSQL cluster")
    if not shutil.which("pg_ctlcluster") or len(versions) != 1:
        pytest.skip("needs pg_ctlcluster and exactly one cluster under /etc/postgresql")
    host = connection.settings_dict.get("HOST") or "localhost"
    if host not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip(f"the test database is on {host}, not on this machine's cluster")
    return ["pg_ctlcluster", "--skip-systemctl-redirect", versions[0], "main", action]
