"""What the bench's scripts beside bench.run share: their arguments, the database they run
in, and where their figures go (results/TOPIC-MODE.json, and in a full run their own section
of docs/benchmarks.md). Apart from bench/common.py, which imports the harness's tools, so
that `--url` runs from the project's venv too."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .django_setup import setup_django

RESULTS = Path(__file__).resolve().parent / "results"


def arguments(doc: str | None) -> argparse.Namespace:
    """--quick, --url, --jobs and --rounds, described by the script's docstring."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--url", default=None, help="default: a database of its own (PG)")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    return parser.parse_args()


def start(args: argparse.Namespace, topic: str, settings: str) -> None:
    """This process's Django on `--url`, or on a fresh database of its own on the bench's
    PostgreSQL (PREFIX + topic), its tables migrated."""
    if args.url is None:
        from . import common  # the bench's own PostgreSQL (and its venv's tools)

        url = common.own_database(topic, args.quick)
    else:
        url = args.url
    setup_django(url, settings)


def record(
    args: argparse.Namespace,
    topic: str,
    figures: dict[str, Any],
    write_section: Callable[[], None],
) -> None:
    """Print the figures; in the bench's own database (no --url) also write them to
    results/TOPIC-MODE.json and, in a full run, the script's section of the page."""
    print(json.dumps(figures, indent=2))
    if args.url is not None:  # the page quotes the bench's own database only
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{topic}-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    if not args.quick:  # docs/benchmarks.md holds full runs only, as bench.report's page
        write_section()


def wait_registered(workers: list[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Until each worker's row is there (its default id is host:pid); then a moment more for
    its listener to LISTEN. On any database, unlike common.wait_listening (PostgreSQL's)."""
    from django_alkqueue.models import Worker

    ids = [f"{socket.gethostname()}:{w.pid}" for w in workers]
    deadline = time.monotonic() + timeout
    while Worker.objects.filter(worker_id__in=ids).count() < len(ids):
        assert time.monotonic() < deadline, f"the workers did not register within {timeout:g} s"
        assert all(w.poll() is None for w in workers), "a worker exited at start-up"
        time.sleep(0.05)
    time.sleep(0.5)
