"""The worker: small services around the core API (each a ...Service, named for what it does),
each run by one Loop, started and stopped in one visible order (runner.py).

acker.py          AckService: groups the acks of finished jobs into one commit
child.py          a process-pool child: runs the handler calls its worker sends (--pool process)
child_exits.py    how a child ended mid-job: its death text, and whether its job crashed it
claim_ahead.py    how many jobs beyond the free threads a claim takes, from the observed pace
claimer.py        claim up to the free capacity, dispatch; ClaimService, the main thread's service
connections.py    connection hygiene for long-lived threads (instead of close_old_connections)
consumer_table.py write the consumer registry to the Consumer table at start (--takeover)
event_loop.py     the one asyncio loop on which `async def` handlers run
executor.py       run one job's handler and turn its outcome into ack / retry / fail
exits.py          the exit statuses (70: a loop died; 78: refused to start) and StartupRefused
flow_state.py     what this worker knows of its queues' limits, handed to claimer and acker
forkserver_setup.py imported by the process pool's fork server: Django set up once
history_sweeper.py HistoryService: the leader's sweep of the history past delete_after, and
                  its partitions ahead
heartbeats.py     HeartbeatService: heartbeats the leases of held jobs, every lease/3
inflight.py       the jobs this worker holds: running, or awaiting their ack
job_notices.py    the pipe that tells the --processes supervisor which jobs a worker process runs
leader.py         which worker leads the cluster-wide maintenance (advisory lock on PostgreSQL)
listener.py       ListenService: LISTENs for enqueue wake-ups (PostgreSQL)
maintenance.py    the leader's services (ReclaimService, WaitReleaseService, SweepService) and
                  LeaderService, which runs them
pool.py           the handler threads
process_pool.py   --pool process: each handler thread's child, terminated, replaced
presence.py       PresenceService: keeps this worker's row in the Worker table
queue_stats.py    the QueueStat writers: QueueStatCountService, the leader's state counts of
                  each minute; QueueStatDeltaService, what each worker did in it
reload.py         --reload: the worker as a child that Django's autoreloader restarts
report.py         deprecated alias of reports/worker_report.py: what the worker prints and logs
runner.py         one worker process: its parts built from one settings read, then the
                  start-up and shutdown sequence
served.py         the consumers a worker serves (@consumer or the Tasks runner), or why none
service.py        the one service shape (name, interval, run_once(now)), Loop and Backoff
signal_relay.py   signal handlers that only write to a pipe; a thread runs the reaction
step_records.py   a claimed job's durable steps, read and written fenced by its claim; one
                  claim's jobs read theirs in one statement
supervisor.py     --processes P: starts, restarts and stops child worker processes
time_limits.py    TimeLimitService: cancels, then abandons, handlers past their timeout
units.py          how the jobs of one claim become handler calls (batch consumers)
vacuumer.py       VacuumService: the leader's VACUUM of the live table when autovacuum falls behind
wire.py           what crosses the pipe to and from a process-pool child: work, outcomes

What this worker did (WorkerStats) and what it prints (StatusReportService, a line per job)
are reports: reports/worker_stats.py and reports/worker_report.py.
"""
