"""Every default of the library, written once; the API, the Tasks backend, the worker and the
docs read them from here (the ALKQUEUE settings' own defaults live on conf.AlkQueueSettings).
"""

from __future__ import annotations

from datetime import timedelta

# -- the stamps of a job (queue(), @consumer, the Tasks backend's OPTIONS) --------------------

#: Attempts before a failing job is dead-lettered.
MAX_ATTEMPTS = 5
#: Seconds of the first retry's delay; each later one doubles it (backoff.py).
BACKOFF_BASE = 5.0
#: Seconds a claim lasts without a heartbeat.
LEASE = 30.0
#: How long dead letters are kept.
RETENTION = timedelta(days=7)
#: A job's priority when none is given.
PRIORITY = 0
#: Seconds a Tasks backend result row is kept after the task finished.
RESULT_RETENTION = 86400.0
#: Times a job's worker may die of an error while the job runs before the job is
#: dead-lettered ("crashed its worker"): a poison job cannot loop through restarts.
CRASHES_TO_DEAD = 2

# -- alk_worker ------------------------------------------------------------------------------

#: Handler threads per worker process.
WORKER_CONCURRENCY = 4
#: Worker processes under one supervisor.
WORKER_PROCESSES = 1
#: The most --processes and --concurrency accept: bounds on what a typo can start (an extra
#: zero), the same on every host, far above any useful size (docs/worker.md, "Options").
WORKER_PROCESSES_MAX = 256
WORKER_CONCURRENCY_MAX = 1024
#: Seconds between two polls of an idle queue.
WORKER_POLL_INTERVAL = 1.0
#: Seconds in-flight jobs get to finish after SIGTERM.
WORKER_SHUTDOWN_TIMEOUT = 30.0
#: Handler threads stuck past their time limit (plus STUCK_GRACE) a worker tolerates; one
#: more and it recycles itself (docs/running-jobs.md).
WORKER_MAX_STUCK = 2
#: Seconds past its time limit after which a handler thread that has not returned is stuck.
STUCK_GRACE = 5.0
#: Where a worker runs its handlers: "thread" (handler threads) or "process" (a pool of
#: child processes; docs/running-jobs.md).
WORKER_POOL = "thread"
#: Seconds a process-pool child gets between SIGTERM and SIGKILL, and a cancelled job's
#: handler gets to return before its child is terminated.
WORKER_KILL_GRACE = 5.0
#: Seconds between two writes of one running job's progress, at most one a second.
PROGRESS_EVERY = 1.0

# -- alk_health and alk_jobs -----------------------------------------------------------------

#: Seconds a pending job may wait in a queue that no live worker serves (a misspelled queue
#: name, a queue left out of every worker's --queue) before alk_health reports it.
HEALTH_ORPHANED_AFTER = 60.0
#: Jobs `alk_jobs list` prints when --limit is not given.
JOBS_LISTED = 50

# -- stored text -----------------------------------------------------------------------------

#: Most characters of error text stored per job or task attempt (error_text.py).
MAX_ERROR_CHARS = 64 * 1024
#: Most characters of an error's first line in the worker's line for a job that did not
#: succeed (reports/worker_report.py).
LOGGED_ERROR_CHARS = 200
