"""Fair share's cost (issue 52): a drain of N no-op jobs by 2 worker processes over 1,000 fair
keys, and over one, against the same drain without fair keys (targets: at least 70% and 90%
of its rate). N = 100,000; --quick: 2,000.

    python -m bench.fair_share [--quick]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "fair"); writes results/fair-MODE.json. Public APIs only: `@consumer`, `queue()`,
`Queue.enqueue_many`, `alk_worker`, and the models to count what is left.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import common

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
KEYS = 1_000
PROCESSES = 2


def _drain(queue_name: str, jobs: int, key: Callable[[Any], str] | None) -> float:
    """Start the workers, let them connect, make `jobs` jobs visible in one commit; returns
    the jobs per second until the queue is empty."""
    from django.db import transaction

    from django_alkqueue import queue

    workers = common.start_workers(queue_name, PROCESSES)
    try:
        common.wait_listening(workers)
        with transaction.atomic():
            queue(queue_name).enqueue_many([{"i": i} for i in range(jobs)], fair_key=key)
        return jobs / common.wait_queue_empty(queue_name, timeout=1800)
    finally:
        common.stop_workers(workers)


def drain(quick: bool) -> dict[str, Any]:
    jobs = 2_000 if quick else 100_000
    rates = {
        "none": _drain("fair-none", jobs, None),
        "one": _drain("fair-one", jobs, lambda p: "tenant"),
        "many": _drain("fair-many", jobs, lambda p: f"tenant-{p['i'] % KEYS}"),
    }
    return {
        "jobs": jobs,
        "jobs/s, no fair key": round(rates["none"]),
        "jobs/s, 1 fair key": round(rates["one"]),
        "jobs/s, 1,000 fair keys": round(rates["many"]),
        "share, 1 key / none (target >= 0.9)": round(rates["one"] / rates["none"], 2),
        "share, 1,000 keys / none (target >= 0.7)": round(rates["many"] / rates["none"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    url = common.own_database("fair", args.quick)
    common.setup_django(url, "bench.settings.alkqueue_fair")
    figures: dict[str, Any] = {f"drain by {PROCESSES} processes": drain(args.quick)}
    figures["run"] = {
        "mode": "quick" if args.quick else "full",
        "started": started,
        "load average at the end": round(os.getloadavg()[0], 1),
        "cores": os.cpu_count(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"fair-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
