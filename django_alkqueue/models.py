"""The tables: live jobs, dead letters, consumers. Reads on the QuerySets; writes in operations."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.db.models import Q

from .fields import PayloadField

MESSAGE_TABLE = "alkqueue_message"
DEAD_LETTER_TABLE = "alkqueue_deadletter"
CONSUMER_TABLE = "alkqueue_consumer"
WORKER_TABLE = "alkqueue_worker"
QUEUE_STAT_TABLE = "alkqueue_queuestat"
TASK_RESULT_TABLE = "alkqueue_taskresult"
PERIODIC_TICK_TABLE = "alkqueue_periodictick"
CLAIM_GATE_TABLE = "alkqueue_claimgate"
CLAIM_LEDGER_TABLE = "alkqueue_claimledger"

# Index names are referenced from the SQL that relies on them (see sql/postgresql/statements.py).
PENDING_INDEX = "alkqueue_pending_idx"
LEASE_INDEX = "alkqueue_lease_idx"
EXPIRY_INDEX = "alkqueue_expiry_idx"
UNIQUE_KEY_CONSTRAINT = "alkqueue_live_unique_key"
CONCURRENCY_KEY_INDEX = "alkqueue_concurrency_key_idx"
CLAIM_LEDGER_INDEX = "alkqueue_claimledger_idx"


class QueueMessageQuerySet(models.QuerySet["QueueMessage"]):
    def unclaimed(self) -> QueueMessageQuerySet:
        return self.filter(claim_token__isnull=True)

    def pending(self, now: datetime) -> QueueMessageQuerySet:
        """Due and unclaimed."""
        return self.unclaimed().filter(run_at__lte=now)

    def scheduled(self, now: datetime) -> QueueMessageQuerySet:
        return self.unclaimed().filter(run_at__gt=now)

    def claimed(self) -> QueueMessageQuerySet:
        return self.filter(claim_token__isnull=False)

    def lapsed(self, now: datetime) -> QueueMessageQuerySet:
        return self.claimed().filter(lease_expires_at__lte=now)

    def expired(self, now: datetime) -> QueueMessageQuerySet:
        return self.filter(expires_at__lte=now)

    def in_state(self, state: str, now: datetime) -> QueueMessageQuerySet:
        if state == "pending":
            return self.pending(now)
        if state == "scheduled":
            return self.scheduled(now)
        if state == "claimed":
            return self.claimed()
        raise ValueError(f"unknown live state {state!r}")


class QueueMessage(models.Model):
    """One live job: pending (due, unclaimed), scheduled (run_at ahead) or claimed."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    payload = PayloadField()
    priority = models.SmallIntegerField(default=0)
    attempts = models.IntegerField(default=0)
    max_attempts = models.IntegerField()
    backoff_base = models.FloatField(help_text="seconds")
    lease = models.FloatField(help_text="seconds")
    retention = models.FloatField(null=True, blank=True, help_text="seconds a dead letter is kept")
    run_at = models.DateTimeField()
    enqueued_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    unique_key = models.CharField(max_length=255, null=True, blank=True)
    #: What `key_concurrency` and `key_rate` count by (docs/flow-control.md).
    concurrency_key = models.CharField(max_length=255, null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)

    objects = QueueMessageQuerySet.as_manager()

    class Meta:
        db_table = MESSAGE_TABLE
        verbose_name = "job"
        permissions = [
            ("cancel_queuemessage", "Can cancel jobs"),
            ("run_now_queuemessage", "Can run jobs now"),
            ("change_priority_queuemessage", "Can change the priority of jobs"),
            # One permission for the payloads of sensitive queues, on live jobs and dead
            # letters alike: the same data, before and after the job died.
            ("view_payload", "Can view payloads of sensitive queues"),
        ]
        indexes = [
            # The claim: unclaimed rows of one queue in handout order.
            models.Index(
                "queue",
                models.F("priority").desc(),
                "run_at",
                "id",
                name=PENDING_INDEX,
                condition=Q(claim_token__isnull=True),
            ),
            # Lapsed leases, and counts of claimed jobs per queue. Holds only claimed rows.
            models.Index(
                fields=["queue", "lease_expires_at"],
                name=LEASE_INDEX,
                condition=Q(claim_token__isnull=False),
            ),
            models.Index(
                fields=["expires_at"], name=EXPIRY_INDEX, condition=Q(expires_at__isnull=False)
            ),
            # Jobs per concurrency key: the busiest keys of a queue and the job list's exact
            # filter. Holds only keyed rows.
            models.Index(
                fields=["queue", "concurrency_key"],
                name=CONCURRENCY_KEY_INDEX,
                condition=Q(concurrency_key__isnull=False),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "unique_key"],
                name=UNIQUE_KEY_CONSTRAINT,
                condition=Q(unique_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue}#{self.id}"


class DeadLetter(models.Model):
    """A job that died: out of attempts, failed on purpose, or expired. Requeue brings it back."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(unique=True, help_text="the id the job had while live")
    queue = models.CharField(max_length=100)
    payload = PayloadField()
    priority = models.SmallIntegerField(default=0)
    attempts = models.IntegerField()
    max_attempts = models.IntegerField()
    backoff_base = models.FloatField()
    lease = models.FloatField()
    retention = models.FloatField(null=True, blank=True)
    run_at = models.DateTimeField()
    enqueued_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    unique_key = models.CharField(max_length=255, null=True, blank=True)
    concurrency_key = models.CharField(max_length=255, null=True, blank=True)
    claimed_by = models.CharField(max_length=255, null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    died_at = models.DateTimeField()
    reason = models.CharField(max_length=100)
    last_error = models.TextField(null=True, blank=True)

    class Meta:
        db_table = DEAD_LETTER_TABLE
        verbose_name = "dead letter"
        permissions = [("requeue_deadletter", "Can requeue dead letters")]
        indexes = [
            models.Index(fields=["queue", "died_at"], name="alkqueue_dead_queue_idx"),
            models.Index(fields=["died_at"], name="alkqueue_dead_died_idx"),
            models.Index(fields=["reason", "died_at"], name="alkqueue_dead_reason_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} ({self.reason})"


class Consumer(models.Model):
    """The handler bound to a queue. Unique on queue: the database refuses a second one."""

    queue = models.CharField(max_length=100, unique=True)
    handler = models.CharField(max_length=255, help_text="dotted path of the handler")
    lease = models.FloatField()
    max_attempts = models.IntegerField()
    retry_policy = models.JSONField(default=dict)
    paused = models.BooleanField(default=False)
    #: The limits the code declares (@consumer), written by the worker at start-up, and the
    #: operator's overrides, which win until reset (limits.py; docs/flow-control.md). Both
    #: map a limit's name to its stored form; an override of None means "no limit".
    code_limits = models.JSONField(default=dict, blank=True)
    limit_overrides = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = CONSUMER_TABLE
        permissions = [
            ("pause_consumer", "Can pause and resume consumers"),
            ("resume_consumer", "Can resume consumers"),
            ("set_limits_consumer", "Can set and reset the limits of consumers"),
        ]

    def __str__(self) -> str:
        return f"{self.queue} -> {self.handler}"


class WorkerQuerySet(models.QuerySet["Worker"]):
    def stale(self, now: datetime, after: float) -> WorkerQuerySet:
        return self.filter(last_heartbeat_at__lt=now - timedelta(seconds=after))

    def live(self, now: datetime, after: float) -> WorkerQuerySet:
        return self.filter(last_heartbeat_at__gte=now - timedelta(seconds=after))


class Worker(models.Model):
    """One running worker process, refreshed every few seconds by its registry loop."""

    worker_id = models.CharField(max_length=255, unique=True)
    hostname = models.CharField(max_length=255)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.IntegerField()
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    jobs_processed = models.BigIntegerField(default=0)
    jobs_failed = models.BigIntegerField(default=0)
    is_leader = models.BooleanField(default=False)

    objects = WorkerQuerySet.as_manager()

    class Meta:
        db_table = WORKER_TABLE

    def __str__(self) -> str:
        return self.worker_id


class QueueStat(models.Model):
    """One row per queue per minute: the chart data of the admin overview.

    Every worker adds what it finished in that minute (an upsert that adds deltas); the
    leader's stats loop writes the state counts it read at that minute.
    """

    queue = models.CharField(max_length=100)
    minute = models.DateTimeField()
    pending = models.IntegerField(default=0)
    scheduled = models.IntegerField(default=0)
    claimed = models.IntegerField(default=0)
    dead = models.IntegerField(default=0)
    finished = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    dead_lettered = models.IntegerField(default=0)

    class Meta:
        db_table = QUEUE_STAT_TABLE
        # The admin index names the model after the page it opens: the queue overview.
        verbose_name_plural = "queue overview"
        permissions = [("view_session_sql", "Can view other sessions' SQL in the health checks")]
        constraints = [
            models.UniqueConstraint(fields=["queue", "minute"], name="alkqueue_stat_minute")
        ]
        indexes = [models.Index(fields=["minute"], name="alkqueue_stat_minute_idx")]

    def __str__(self) -> str:
        return f"{self.queue} @ {self.minute:%Y-%m-%d %H:%M}"


class TaskResult(models.Model):
    """What a django.tasks task did, kept apart from the live table so that retained results
    never touch the claim index. Written by the task consumer; pruned after retention."""

    job_id = models.BigIntegerField(unique=True)
    backend = models.CharField(max_length=100)
    task_path = models.CharField(max_length=255)
    queue = models.CharField(max_length=100)
    #: What the task was enqueued with, so that a result outliving its job still rebuilds
    #: the task as enqueued (None on rows written before these columns existed).
    priority = models.IntegerField(null=True, blank=True)
    run_after = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    return_value = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list)
    worker_ids = models.JSONField(default=list)
    enqueued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = TASK_RESULT_TABLE
        indexes = [
            models.Index(
                fields=["expires_at"],
                name="alkqueue_result_expiry_idx",
                condition=Q(expires_at__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_path} #{self.job_id} ({self.status})"


class PeriodicTick(models.Model):
    """The last tick enqueued for each periodic schedule. Advanced in the same transaction as
    the enqueue, so a tick is enqueued once even after its job has run and left the table."""

    name = models.CharField(max_length=200, unique=True)
    last_tick = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = PERIODIC_TICK_TABLE

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_tick:%Y-%m-%d %H:%M:%S}"


class ClaimGate(models.Model):
    """One row per queue with limits: the row its claimers lock in turn, so that counting
    the live claims and taking new ones is one step at a time (docs/flow-control.md)."""

    queue = models.CharField(max_length=100, unique=True)
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = CLAIM_GATE_TABLE

    def __str__(self) -> str:
        return self.queue


class ClaimLedger(models.Model):
    """How many jobs one limited claim took, and when: what `rate` (key "") and `key_rate`
    (the job's concurrency key) count. Written and pruned under the queue's ClaimGate lock."""

    queue = models.CharField(max_length=100)
    #: "" for the queue's own count; a concurrency key for that key's.
    concurrency_key = models.CharField(max_length=255)
    claimed_at = models.DateTimeField()
    count = models.IntegerField()

    class Meta:
        db_table = CLAIM_LEDGER_TABLE
        indexes = [
            models.Index(fields=["queue", "concurrency_key", "claimed_at"], name=CLAIM_LEDGER_INDEX)
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.concurrency_key} {self.count} @ {self.claimed_at}"
