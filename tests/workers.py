"""Run real `manage.py alk_worker` processes against the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_env() -> dict[str, str]:
    """Environment that points a subprocess at this test run's database."""
    db = settings.DATABASES["default"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "testproject.settings"}
    # As in production: with DEBUG on, Django logs every query, and the hot statements then go
    # through Django's cursor instead of their prepared path (sql/postgresql/session.py).
    env["DJANGO_DEBUG"] = "0"
    if connection.vendor == "postgresql":
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        env["DATABASE_URL"] = f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"
    elif connection.vendor == "mysql":
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 3306
        env["DATABASE_URL"] = f"mysql://{db['USER']}:{db['PASSWORD']}@{host}:{port}/{db['NAME']}"
    else:
        env["DATABASE_URL"] = ""
        env["ALKQUEUE_SQLITE_NAME"] = str(db["NAME"])
    return env


def worker_command(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), "alk_worker", *args]


def start_worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start a worker; its output is captured (read it with .communicate() after it ends)."""
    return subprocess.Popen(
        worker_command(*args),
        env={**database_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


class Watched:
    """A worker subprocess whose output is read continuously (so a chatty worker never blocks
    on a full pipe) and kept for the assertion messages."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.append(line)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def alive(self) -> bool:
        return self.process.poll() is None


def run_worker(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run a worker to its end (--burst or --max-jobs); returns its output, fails on exit != 0."""
    process = start_worker(*args, env=env)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"worker did not finish in {timeout}s:\n{output}") from None
    assert process.returncode == 0, f"worker exited {process.returncode}:\n{output}"
    return output


def stop(process: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 60) -> str:
    """Send `sig`, wait for the exit, return the output."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"worker ignored signal {sig}:\n{output}") from None
    return output


def run_manage(
    *args: str, timeout: float = 60, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env={**database_env(), **(env_extra or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
