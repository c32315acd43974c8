"""Each scenario's figures, appended as JSON to test-artifacts/chaos/<mode>/ for render.py."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from .invariants import Report
from .scale import MODE

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "chaos"
#: Every record written in this session, so a test that fails after writing its record
#: (a scenario-specific assertion) can mark it failed (see conftest.py).
WRITTEN: list[Path] = []


def database() -> str:
    """The database's name for the records: Django calls MariaDB "mysql"."""
    if connection.vendor == "mysql" and getattr(connection, "mysql_is_mariadb", False):
        return "mariadb"
    return connection.vendor


class Stopwatch:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)


def record(
    number: int,
    title: str,
    did: str,
    report: Report,
    seconds: float,
    details: dict[str, Any] | None = None,
) -> Path:
    """Write scenario `number`'s record for this mode and database; returns its path."""
    folder = ARTIFACTS / MODE
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{number:02d}-{database()}.json"
    body = {
        "number": number,
        "title": title,
        "did": did,
        "mode": MODE,
        "database": database(),
        "passed": report.ok,
        "problems": report.problems[:20],
        "figures": dataclasses.asdict(report.figures),
        "details": details or {},
        "seconds": seconds,
        "recorded_at": timezone.now().isoformat(timespec="seconds"),
    }
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    WRITTEN.append(path)
    return path


def mark_failed(path: Path, reason: str) -> None:
    body = json.loads(path.read_text())
    body["passed"] = False
    body["problems"] = [*body["problems"], f"test failed: {reason}"][:20]
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
