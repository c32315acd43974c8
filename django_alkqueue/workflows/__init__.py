"""Workflows (docs/workflows.md): jobs that wait for others (`after=`), batches whose
callbacks fire once when their last member finishes, and chains.

- specs.py: JobSpec, the unsent job `Queue.job()` builds for callbacks and chains.
- dependencies.py: waiting jobs, their release on a dependency's ack, failure propagation.
- batches.py: the `batch()` block, member outcomes, and the exactly-once firing.
- chains.py: `chain()`, sugar over `after=`.
- finishing.py: what a job's ack, death, cancel or requeue does to the workflows it is in,
  called by operations.py in the same transaction.
- sweep.py: the leader's repair of what a crash between two transactions left.
"""
