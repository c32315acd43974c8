"""Workflows (docs/workflows.md): jobs that wait for others (`after=`), batches whose
callbacks fire once when their last member finishes, and chains.

- specs.py: JobSpec, the unsent job `Queue.job()` builds for callbacks and chains; a value,
  sent through the sender queues.py registers (the workflows' rows sit below the queue API).
- dependencies.py: waiting jobs, their release on a dependency's ack, failure propagation.
- batches.py: the `batch()` block, member outcomes, and the exactly-once firing.
- chains.py: `chain()`, sugar over `after=`.
- finishing.py: what a job's ack, death, cancel or requeue does to the workflows it is in,
  called by operations.py in the same transaction.
- sweep.py: the leader's backstop: repairs what a crash after a claim's deaths, a bug
  or a hand-edited row left.
- standing.py, component.py, graph.py: what the admin shows of a workflow (reads, layout).

specs.py and graph.py are values; dependencies, batches, finishing, sweep, standing and
component are in the operations layer; chains.py uses the queue API (docs/architecture.md).
"""
