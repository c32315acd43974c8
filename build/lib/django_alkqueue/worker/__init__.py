"""The worker: small loops around the core API, started and stopped in one visible order.

runner.py       the start-up and shutdown sequence of one worker process
supervisor.py   --processes P: starts, restarts and stops child worker processes
claimer.py      claim up to the free capacity, dispatch to the pool, wait for a wake-up
executor.py     run one job's handler and turn its outcome into ack / retry / fail
acker.py        group the acks of finished jobs into one commit
lease_keeper.py renew the leases of running jobs in one UPDATE every lease/3
leader.py       which worker runs the cluster-wide maintenance (advisory lock on PostgreSQL)
maintenance.py  reclaim and sweep: the leader's services
presence.py     this worker's row in the Worker table
listener.py     LISTEN for enqueue wake-ups on PostgreSQL
service.py      the one loop shape every periodic service shares
"""
