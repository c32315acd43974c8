"""What the chaos handlers write, each row in its own transaction (autocommit), so that a
row survives whatever happens to the job afterwards: a kill, a lost lease, a rolled-back ack.

How a run is read (tests/chaos/invariants.py):
- ExecutionLog: one row per handler execution, inserted when the handler starts; `outcome`
  and `finished_at` are written by a second UPDATE when it ends: "completed" (returned, so
  the worker will try to ack), "failed" (raised on purpose, so the worker will retry or
  dead-letter), "exited" (about to os._exit), "blocked" (about to block past its lease). A
  row whose outcome stays empty is an execution cut short: its process was killed, or the
  database went away under it.
- AckLog: one row per ack the queue confirmed (the job_succeeded signal is sent only for
  the ids the ack's DELETE returned), so two rows for one job would be a double ack.
- Gate: named flags a test opens to release handlers that wait on them.
"""

from django.db import models
from django.utils import timezone


class ExecutionLog(models.Model):
    job_id = models.BigIntegerField(db_index=True)
    queue = models.CharField(max_length=100)
    worker_id = models.CharField(max_length=255)
    pid = models.IntegerField()
    attempt = models.IntegerField()
    #: When the claim that handed out this execution was made (the job's claimed_at).
    claimed_at = models.DateTimeField(null=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True)
    outcome = models.CharField(max_length=20, blank=True, default="")
    #: The echo consumer's sha256 of the payload it received, as compact JSON.
    note = models.CharField(max_length=255, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} attempt {self.attempt} on {self.worker_id}"


class AckLog(models.Model):
    job_id = models.BigIntegerField(db_index=True)
    queue = models.CharField(max_length=100)
    worker_id = models.CharField(max_length=255)
    attempt = models.IntegerField()
    claimed_at = models.DateTimeField(null=True)
    acked_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} acked at attempt {self.attempt}"


class Gate(models.Model):
    name = models.CharField(max_length=100, unique=True)
    opened_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name
