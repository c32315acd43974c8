"""Everything that reports on queues and workers, one module per report (docs/architecture.md,
"reports/"):

- status.py: the numbers of `alk_status` and the admin overview (a row per queue, per worker
  and per running job; each queue's oldest pending job);
- queue_stats.py: what the QueueStat minutes say (throughput, the charts' history, the
  leader's last readings);
- frequent_errors.py: the dead letters grouped by their error (the error groups);
- flow_status.py: flow control as the operator sees it (limits in force, throttled jobs,
  busiest keys);
- health.py: the checks of `alk_health` and their exit statuses;
- database_health.py: what quietly stalls the database under the queue (the admin's health
  checks);
- worker_stats.py: what one worker did, per queue and outcome, in its memory;
- worker_report.py: what the worker prints and logs (a line per job, the status line, the
  --burst table);
- formats.py: how a count and an age are written;
- metrics/: the Prometheus exposition, its collector and its view.
"""
