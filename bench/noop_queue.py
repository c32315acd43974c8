"""The testproject's no-op queue, set up for the by-hand scripts (drain_rate.py,
claim_cost.py): their arguments, Django on the chosen dialect, and the queue emptied and
filled with N jobs."""

from __future__ import annotations

import argparse
import os
from typing import Any

QUEUE = "shop-noop"


def arguments(doc: str, default_jobs: int) -> argparse.Namespace:
    """--jobs and --dialect, described by the script's docstring's first line."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=default_jobs)
    parser.add_argument("--dialect", choices=["auto", "orm"], default="auto")
    return parser.parse_args()


def seeded(jobs: int, dialect: str) -> Any:
    """Django set up on `dialect` (DATABASE_URL as for the testproject, DEBUG off), the
    database migrated, and the no-op queue holding exactly `jobs` pending jobs."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    os.environ["ALKQUEUE_DIALECT"] = dialect
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    from django_alkqueue import queue

    call_command("migrate", verbosity=0)
    noop = queue(QUEUE)
    noop.purge(["pending", "scheduled", "claimed", "dead"])
    noop.enqueue_many([{"n": n} for n in range(jobs)])
    return noop
