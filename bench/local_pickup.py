"""Pick-up without NOTIFY (issue 53): how soon an idle worker on SQLite or MariaDB starts a
job enqueued on its own host (sql/local_wakeups.py), and what the idle worker costs.

One worker (`--poll-interval 1`, the default) serves the testproject's `shop-emails` queue;
after it has idled `--idle` seconds (its CPU time over that span is the idle cost), JOBS jobs
are enqueued one at a time, GAP seconds apart, and each job's pick-up is its handler's first
write (HandlerRun.created_at) minus its enqueue (Job.enqueued_at), both read off this host's
clock.

    DATABASE_URL=mysql://alkqueue:alkqueue@127.0.0.1:3306/alkqueue \\
        .venv/bin/python -m bench.local_pickup    # or DATABASE_URL= for SQLite

Run from the project's venv against a migrated database (`manage.py migrate`); figures in
docs/benchmarks.md ("Pick-up without NOTIFY").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "shop-emails"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--idle", type=float, default=30.0)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    import django

    django.setup()
    from django.db import connection

    from django_alkqueue import queue
    from django_alkqueue.models import QueueMessage
    from testproject.shop.models import HandlerRun

    QueueMessage.objects.filter(queue=QUEUE).delete()
    command = [sys.executable, str(ROOT / "manage.py"), "alk_worker", "--queue", QUEUE]
    worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(5)  # started, migrated consumer rows written, first looks done
        cpu, at = cpu_seconds(worker.pid), time.monotonic()
        time.sleep(args.idle)
        idle = (cpu_seconds(worker.pid) - cpu) / (time.monotonic() - at)
        jobs = []
        for n in range(args.jobs):
            jobs.append(queue(QUEUE).enqueue({"to": f"{n}@example.com"}))
            time.sleep(args.gap)
        ids = [job.id for job in jobs]
        deadline = time.monotonic() + 60
        while HandlerRun.objects.filter(job_id__in=ids).count() < len(ids):
            if time.monotonic() > deadline:
                raise SystemExit("the jobs did not all start within a minute")
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait()
    started = dict(HandlerRun.objects.filter(job_id__in=ids).values_list("job_id", "created_at"))
    waits = [(started[job.id] - job.enqueued_at).total_seconds() * 1000 for job in jobs]
    print(f"{connection.vendor}: pick-up of {len(waits)} jobs, {args.gap * 1000:.0f} ms apart: "
          f"p50 {percentile(waits, 50):.1f} ms, p95 {percentile(waits, 95):.1f} ms, "
          f"p99 {percentile(waits, 99):.1f} ms, max {max(waits):.1f} ms; "
          f"idle worker {idle * 100:.2f}% of one core")  # fmt: skip


if __name__ == "__main__":
    main()
