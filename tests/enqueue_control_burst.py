"""A burst of enqueues from one process, for tests/test_enqueue_controls_workers.py:

    python -m tests.enqueue_control_burst debounce|window QUEUE THREADS EACH

Waits for the file named by BURST_GO to exist, so that every process starts together, then
enqueues EACH jobs from each of THREADS threads with one debounce key (debounce=60) or one
unique key (unique_for=1h), and prints the ids it got back (null for None) as JSON."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import timedelta

import django


def main() -> None:
    mode, name, threads, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    django.setup()
    from django.db import connections

    from django_alkqueue import queue

    go = os.environ["BURST_GO"]
    ids: list[int | None] = []
    errors: list[BaseException] = []

    def body(thread: int) -> None:
        try:
            q = queue(name)
            for n in range(each):
                payload = {"pid": os.getpid(), "thread": thread, "n": n}
                if mode == "debounce":
                    job = q.enqueue(payload, debounce_key="k", debounce=60)
                else:
                    job = q.enqueue(payload, unique_key="k", unique_for=timedelta(hours=1))
                ids.append(None if job is None else job.id)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    while not os.path.exists(go):
        time.sleep(0.01)
    workers = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    print(json.dumps(ids))


if __name__ == "__main__":
    main()
