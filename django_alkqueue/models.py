"""The tables: live jobs, dead letters, consumers. Reads on the QuerySets; writes in operations."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from .fields import PayloadField

#: Every model's app_label, written out: so that, with the app missing from INSTALLED_APPS,
#: the models still import and the system check alkqueue.E103 can say what to do instead of
#: Django's RuntimeError naming a model (checks.py, admin_site.py).
APP_LABEL = "django_alkqueue"
#: The AdminConfig whose ready() registers alkqueue.E103.
ADMIN_CONFIG = "django_alkqueue.admin_site.AdminConfig"


def _require_app() -> None:
    """Without the app, importing the models is refused with what to do, unless this
    project's AdminConfig is ours: then its check alkqueue.E103 says it, with the other
    system checks' messages, and no traceback."""
    if apps.is_installed(APP_LABEL):
        return
    configs = {f"{type(c).__module__}.{type(c).__qualname__}" for c in apps.get_app_configs()}
    if ADMIN_CONFIG not in configs:
        raise ImproperlyConfigured(
            '"django_alkqueue" is not in INSTALLED_APPS: add it, then run `python manage.py '
            "migrate`. See docs/checks.md#alkqueuee103."
        )


_require_app()

MESSAGE_TABLE = "alkqueue_message"
DEAD_LETTER_TABLE = "alkqueue_deadletter"
CONSUMER_TABLE = "alkqueue_consumer"
WORKER_TABLE = "alkqueue_worker"
QUEUE_STAT_TABLE = "alkqueue_queuestat"
TASK_RESULT_TABLE = "alkqueue_taskresult"
PERIODIC_TICK_TABLE = "alkqueue_periodictick"
CLAIM_GATE_TABLE = "alkqueue_claimgate"
CLAIM_LEDGER_TABLE = "alkqueue_claimledger"
CANCEL_REQUEST_TABLE = "alkqueue_cancelrequest"
#: The history (docs/running-jobs.md): on PostgreSQL a table partitioned by finished day.
HISTORY_TABLE = "alkqueue_finishedjob"
# Workflows (docs/workflows.md).
BATCH_TABLE = "alkqueue_batch"
BATCH_MEMBER_TABLE = "alkqueue_batchmember"
DEPENDENCY_TABLE = "alkqueue_dependency"
WAITING_TABLE = "alkqueue_waitingjob"
#: Durable steps (docs/durable-steps.md): what `job.step` recorded, by job id.
STEP_TABLE = "alkqueue_jobstep"
#: A job's steps, by (job_id, name): what a run loads, what a record must not repeat, what
#: a delete with the job walks.
STEP_CONSTRAINT = "alkqueue_jobstep_name"
#: Signals sent to jobs (docs/durable-steps.md): what `job.wait_for` returns, by job id.
SIGNAL_TABLE = "alkqueue_jobsignal"
#: A job's signals, by (job_id, name): one per name (the first stays), what a wait reads,
#: what a delete with the job walks.
SIGNAL_CONSTRAINT = "alkqueue_jobsignal_name"
#: The waits for a signal by deadline: what the leader's release of lapsed waits walks.
WAIT_DEADLINE_INDEX = "alkqueue_wait_deadline_idx"
#: A batch's members by outcome: its counts, and the probe for an unfinished member.
BATCH_MEMBER_INDEX = "alkqueue_batch_member_idx"
#: A job's dependents: what its ack releases and its death fails.
DEPENDENCY_INDEX = "alkqueue_dependency_on_idx"

# Index names are referenced from the SQL that relies on them (see sql/postgresql/statements.py).
PENDING_INDEX = "alkqueue_pending_idx"
LEASE_INDEX = "alkqueue_lease_idx"
EXPIRY_INDEX = "alkqueue_expiry_idx"
UNIQUE_KEY_CONSTRAINT = "alkqueue_live_unique_key"
#: One unclaimed job per (queue, debounce key): a claim clears the key (docs/queues.md).
DEBOUNCE_KEY_CONSTRAINT = "alkqueue_open_debounce_key"
UNIQUE_WINDOW_TABLE = "alkqueue_uniquewindow"
#: One window per (queue, unique key), and the sweep's walk over the lapsed ones.
UNIQUE_WINDOW_CONSTRAINT = "alkqueue_unique_window_key"
UNIQUE_WINDOW_LAPSE_INDEX = "alkqueue_window_lapse_idx"
CONCURRENCY_KEY_INDEX = "alkqueue_concurrency_key_idx"
#: Unclaimed jobs per fair key: whether a queue takes turns, and the admin's keys with ready jobs.
FAIR_KEY_INDEX = "alkqueue_fair_key_idx"
#: The fair key the turns and the fair claims count the jobs without a fair key under (a fair
#: key is never empty).
NO_FAIR_KEY = ""
FAIR_TURN_TABLE = "alkqueue_fairturn"
FAIR_TURN_CONSTRAINT = "alkqueue_fair_turn_key"
#: The fair claims per key and bucket (docs/fair-share.md, "Share of claims"): one row per
#: (queue, fair key, bucket), which the claim's upsert adds to and the admin's share reads.
FAIR_CLAIMS_TABLE = "alkqueue_fairclaims"
FAIR_CLAIMS_CONSTRAINT = "alkqueue_fair_claims_key"
#: The buckets by start: what the leader's sweep of old buckets walks.
FAIR_CLAIMS_BUCKET_INDEX = "alkqueue_fair_bucket_idx"
CLAIM_LEDGER_INDEX = "alkqueue_claimledger_idx"
ERROR_GROUP_INDEX = "alkqueue_dead_error_idx"
ERROR_FINGERPRINT_INDEX = "alkqueue_dead_fingerprint_idx"
#: Finished jobs that did not succeed, and those with a concurrency key (few rows each).
FINISHED_OTHER_INDEX = "alkqueue_finished_other_idx"
FINISHED_KEY_INDEX = "alkqueue_finished_key_idx"
RESULT_EXPIRY_INDEX = "alkqueue_result_expiry_idx"
BATCH_OPEN_INDEX = "alkqueue_batch_open_idx"


class StandIn(NamedTuple):
    """A full index that, on a database without partial indexes (MariaDB, MySQL), serves the
    queries of a partial index or conditional unique constraint (docs/databases.md, "Indexes")."""

    table: str
    name: str
    #: As CREATE INDEX lists them; the first word of each is a column.
    columns: tuple[str, ...]
    unique: bool = False


#: What stands in for each of the models' partial indexes and conditional constraints, by its
#: name, where partial indexes are missing. Django builds a conditional index there without
#: its condition, a full index that serves the same queries: its own stand-in. It leaves out
#: the claim index (on expressions) and the conditional constraints; the migrations build
#: the full indexes named here in their place (0001, 0013). Where the index without its
#: condition would repeat another, it goes (0019) and the other stands in. Django's warnings
#: about them (models.W036, W037, W043) are answered by these;
#: alkqueue.W102 reports one missing from the database.
STAND_INS = {
    PENDING_INDEX: StandIn(
        MESSAGE_TABLE, "alkqueue_claim_full_idx",
        ("queue", "claim_token", "priority DESC", "run_at", "id"),
    ),
    UNIQUE_KEY_CONSTRAINT: StandIn(
        MESSAGE_TABLE, "alkqueue_unique_key_full", ("queue", "unique_key"), unique=True
    ),
    DEBOUNCE_KEY_CONSTRAINT: StandIn(
        MESSAGE_TABLE, "alkqueue_debounce_key_full", ("queue", "debounce_key"), unique=True
    ),
    FAIR_KEY_INDEX: StandIn(MESSAGE_TABLE, FAIR_KEY_INDEX, ("queue", "fair_key")),
    LEASE_INDEX: StandIn(MESSAGE_TABLE, LEASE_INDEX, ("queue", "lease_expires_at")),
    EXPIRY_INDEX: StandIn(MESSAGE_TABLE, EXPIRY_INDEX, ("expires_at",)),
    CONCURRENCY_KEY_INDEX: StandIn(
        MESSAGE_TABLE, CONCURRENCY_KEY_INDEX, ("queue", "concurrency_key")
    ),
    # Built without its condition it would be alkqueue_finished_at_idx twice (0019 drops it).
    FINISHED_OTHER_INDEX: StandIn(HISTORY_TABLE, "alkqueue_finished_at_idx", ("finished_at",)),
    FINISHED_KEY_INDEX: StandIn(HISTORY_TABLE, FINISHED_KEY_INDEX, ("concurrency_key",)),
    RESULT_EXPIRY_INDEX: StandIn(TASK_RESULT_TABLE, RESULT_EXPIRY_INDEX, ("expires_at",)),
    BATCH_OPEN_INDEX: StandIn(BATCH_TABLE, BATCH_OPEN_INDEX, ("created_at",)),
}  # fmt: skip


#: Django's warnings of what a database cannot build as declared: a unique constraint with a
#: condition (W036), an index with a condition (W037), an index on expressions (W043).
PARTIAL_INDEX_WARNINGS = frozenset({"models.W036", "models.W037", "models.W043"})


def without_stood_in(
    messages: list[checks.CheckMessage], model: type[models.Model], databases: Iterable[str]
) -> list[checks.CheckMessage]:
    """`messages` without Django's warnings about what `databases` cannot build of `model`'s
    own indexes and constraints as declared, where each one they concern has a stand-in.
    A model with a partial index not in STAND_INS keeps its warnings."""
    if not any(m.id in PARTIAL_INDEX_WARNINGS and m.obj is model for m in messages):
        return messages  # PostgreSQL, SQLite: nothing to answer, no server to ask
    answered = stood_in_warnings(model, databases)
    return [m for m in messages if not (m.id in answered and m.obj is model)]


def stood_in_warnings(model: type[models.Model], databases: Iterable[str]) -> set[str]:
    """The ids of Django's warnings about `model` that its stand-ins answer on `databases`.
    W036 and W037 arise only where partial indexes are missing, where the stand-ins are
    built; W043 where indexes on expressions are, which is not always such a database."""
    meta = model._meta
    answered: set[str] = set()
    if all(i.name in STAND_INS for i in meta.indexes if i.condition is not None):
        answered.add("models.W037")
    conditional = [
        c
        for c in meta.constraints
        if isinstance(c, models.UniqueConstraint) and c.condition is not None
    ]
    if all(c.name in STAND_INS for c in conditional):
        answered.add("models.W036")
    if all(i.name in STAND_INS for i in meta.indexes if i.expressions) and all(
        not connections[db].features.supports_partial_indexes
        for db in databases
        if not connections[db].features.supports_expression_indexes
    ):
        answered.add("models.W043")
    return answered


class QueueMessageQuerySet(models.QuerySet["QueueMessage"]):
    def unclaimed(self) -> QueueMessageQuerySet:
        return self.filter(claim_token__isnull=True)

    def pending(self, now: datetime) -> QueueMessageQuerySet:
        """Due and unclaimed."""
        return self.unclaimed().filter(run_at__lte=now)

    def scheduled(self, now: datetime) -> QueueMessageQuerySet:
        """Due later (waiting jobs, with no run_at, are not: SQL leaves NULL out)."""
        return self.unclaimed().filter(run_at__gt=now)

    def waiting(self) -> QueueMessageQuerySet:
        """Waiting for their dependencies or a signal (workflows/dependencies.py, waits.py):
        no run_at until released, so never due."""
        return self.unclaimed().filter(run_at__isnull=True)

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
        if state == "waiting":
            return self.waiting()
        if state == "claimed":
            return self.claimed()
        raise ValueError(f"unknown live state {state!r}")


class QueueMessage(models.Model):
    """One live job: pending (due, unclaimed), scheduled (run_at ahead), waiting (no run_at:
    workflows/dependencies.py, waits.py) or claimed."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100, verbose_name=_("queue"))
    payload = PayloadField(verbose_name=_("payload"))
    priority = models.SmallIntegerField(default=0, verbose_name=_("priority"))
    attempts = models.IntegerField(default=0, verbose_name=_("attempts"))
    max_attempts = models.IntegerField(verbose_name=_("max attempts"))
    backoff_base = models.FloatField(help_text=_("seconds"), verbose_name=_("backoff base"))
    lease = models.FloatField(help_text=_("seconds"), verbose_name=_("lease"))
    retention = models.FloatField(
        null=True,
        blank=True,
        help_text=_("seconds a dead letter is kept"),
        verbose_name=_("retention"),
    )
    #: When the job is due; NULL while it waits (its own run_at kept in its WaitingJob row):
    #: `run_at <= now` is never true of NULL, so no claim takes it.
    run_at = models.DateTimeField(null=True, verbose_name=_("run at"))
    enqueued_at = models.DateTimeField(verbose_name=_("enqueued at"))
    #: When a requeue last brought it back from the dead letters; enqueued_at stays the
    #: first enqueue's, and its lifetime (expires_at) counts from here.
    requeued_at = models.DateTimeField(null=True, blank=True, verbose_name=_("requeued at"))
    expires_at = models.DateTimeField(null=True, blank=True, verbose_name=_("expires at"))
    unique_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("unique key")
    )
    #: What `key_concurrency` and `key_rate` count by (docs/flow-control.md).
    concurrency_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("concurrency key")
    )
    #: What the claim takes turns between (docs/fair-share.md); None: the no-key jobs' turn.
    fair_key = models.CharField(max_length=255, null=True, blank=True, verbose_name=_("fair key"))
    #: While the job is unclaimed, an enqueue with this debounce key updates it in place
    #: (docs/queues.md, "Debounce"); its claim clears the key, so a run under way is apart.
    debounce_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("debounce key")
    )
    #: debounce_max after the burst's first enqueue: an update in place never moves run_at past it.
    debounce_deadline = models.DateTimeField(
        null=True, blank=True, verbose_name=_("debounce deadline")
    )
    claim_token = models.UUIDField(null=True, blank=True, verbose_name=_("claim token"))
    claimed_by = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("claimed by")
    )
    claimed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("claimed at"))
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, verbose_name=_("lease expires at")
    )
    last_error = models.TextField(null=True, blank=True, verbose_name=_("last error"))
    #: The W3C trace context of the enqueue's span (tracing.py; docs/operations.md, "Traces"),
    #: as a JSON object of its headers ({"traceparent": ...}); None when nothing traced it.
    trace_context = models.TextField(null=True, blank=True, verbose_name=_("trace context"))
    #: What the running job last reported, as JSON text {"done", "total", "note"}, written
    #: with the heartbeats (docs/running-jobs.md); `progress_at` is when it reported it.
    progress = models.TextField(null=True, blank=True, verbose_name=_("progress"))
    progress_at = models.DateTimeField(null=True, blank=True, verbose_name=_("progress at"))
    #: Whether finishing this job touches a workflow: it is a batch member or a job waits for
    #: it. Each dialect's ACK returns it, so a plain job's ack stays one statement and only a
    #: marked one is followed by the workflow bookkeeping (docs/workflows.md, "The ack").
    in_workflow = models.BooleanField(
        default=False, db_default=False, editable=False, verbose_name=_("in a workflow")
    )
    #: How many times this job took its worker down: a loop of the worker died while it ran,
    #: or its process-pool child ended of its own (docs/reliability.md). At
    #: defaults.CRASHES_TO_DEAD the job is dead-lettered instead of given back.
    crashes = models.PositiveSmallIntegerField(
        default=0, db_default=0, editable=False, verbose_name=_("crashes")
    )

    objects = QueueMessageQuerySet.as_manager()

    class Meta:
        app_label = APP_LABEL
        db_table = MESSAGE_TABLE
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        permissions = [
            ("cancel_queuemessage", "Can cancel jobs"),
            ("run_now_queuemessage", "Can run jobs now"),
            ("change_priority_queuemessage", "Can change the priority of jobs"),
            ("signal_queuemessage", "Can send signals to jobs"),
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
            # Unclaimed jobs per fair key: whether the queue takes turns (fair_share.py) and
            # the admin's ready jobs per key. Holds only unclaimed keyed rows.
            models.Index(
                fields=["queue", "fair_key"],
                name=FAIR_KEY_INDEX,
                condition=Q(fair_key__isnull=False, claim_token__isnull=True),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "unique_key"],
                name=UNIQUE_KEY_CONSTRAINT,
                condition=Q(unique_key__isnull=False),
            ),
            # MySQL and MariaDB: a full unique index stands in (migration 0013), which holds
            # because the key is NULL on every other row.
            models.UniqueConstraint(
                fields=["queue", "debounce_key"],
                name=DEBOUNCE_KEY_CONSTRAINT,
                condition=Q(debounce_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue}#{self.id}"

    # Django documents overriding a model's check; what it leaves out is in STAND_INS.
    @classmethod
    def check(cls, **kwargs: Any) -> list[checks.CheckMessage]:
        return without_stood_in(super().check(**kwargs), cls, kwargs.get("databases") or [])


class DeadLetter(models.Model):
    """A job that died: out of attempts, failed on purpose, or expired. Requeue brings it back."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(
        unique=True, help_text=_("the id the job had while live"), verbose_name=_("job id")
    )
    queue = models.CharField(max_length=100, verbose_name=_("queue"))
    payload = PayloadField(verbose_name=_("payload"))
    priority = models.SmallIntegerField(default=0, verbose_name=_("priority"))
    attempts = models.IntegerField(verbose_name=_("attempts"))
    max_attempts = models.IntegerField(verbose_name=_("max attempts"))
    backoff_base = models.FloatField(verbose_name=_("backoff base"))
    lease = models.FloatField(verbose_name=_("lease"))
    retention = models.FloatField(null=True, blank=True, verbose_name=_("retention"))
    run_at = models.DateTimeField(verbose_name=_("run at"))
    enqueued_at = models.DateTimeField(verbose_name=_("enqueued at"))
    #: Kept from the live row: a second requeue counts the lifetime from the first one.
    requeued_at = models.DateTimeField(null=True, blank=True, verbose_name=_("requeued at"))
    expires_at = models.DateTimeField(null=True, blank=True, verbose_name=_("expires at"))
    unique_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("unique key")
    )
    concurrency_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("concurrency key")
    )
    #: Kept from the live row, so a requeued job takes its turns again (docs/fair-share.md).
    fair_key = models.CharField(max_length=255, null=True, blank=True, verbose_name=_("fair key"))
    claimed_by = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("claimed by")
    )
    claimed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("claimed at"))
    died_at = models.DateTimeField(verbose_name=_("died at"))
    reason = models.CharField(max_length=100, verbose_name=_("reason"))
    last_error = models.TextField(null=True, blank=True, verbose_name=_("last error"))
    #: The error group (error_groups.fingerprint of last_error), written when the job dies.
    error_fingerprint = models.CharField(
        max_length=32, null=True, blank=True, verbose_name=_("error fingerprint")
    )
    #: Kept from the live row, so a requeued job's run still links to its enqueue.
    trace_context = models.TextField(null=True, blank=True, verbose_name=_("trace context"))

    class Meta:
        app_label = APP_LABEL
        db_table = DEAD_LETTER_TABLE
        verbose_name = _("dead letter")
        verbose_name_plural = _("dead letters")
        permissions = [("requeue_deadletter", "Can requeue dead letters")]
        indexes = [
            models.Index(fields=["queue", "died_at"], name="alkqueue_dead_queue_idx"),
            models.Index(fields=["died_at"], name="alkqueue_dead_died_idx"),
            models.Index(fields=["reason", "died_at"], name="alkqueue_dead_reason_idx"),
            # The error groups: GROUP BY (queue, fingerprint) with the first and last death,
            # from the index alone; a group's dead letters, newest first.
            models.Index(fields=["queue", "error_fingerprint", "died_at"], name=ERROR_GROUP_INDEX),
            # One group's dead letters across queues (the changelist's error group filter).
            models.Index(fields=["error_fingerprint", "died_at"], name=ERROR_FINGERPRINT_INDEX),
        ]

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} ({self.reason})"


class FinishedJob(models.Model):
    """A finished job kept for its queue's `keep` (docs/running-jobs.md, "History and
    recorded output"): written in the transaction of its ack, deleted by the leader's
    history sweep once past `delete_after`.

    On PostgreSQL the table is partitioned by the day of `finished_at` (migration 0003), and
    its primary key is (job_id, finished_at), since a partitioned table's must include the
    partition key; Django still reads `job_id` as the primary key, which holds: a job id is
    handed out once, and a job finishes once.
    """

    job_id = models.BigIntegerField(primary_key=True, verbose_name=_("job id"))
    queue = models.CharField(max_length=100, verbose_name=_("queue"))
    payload = PayloadField(verbose_name=_("payload"))
    priority = models.SmallIntegerField(default=0, verbose_name=_("priority"))
    attempts = models.IntegerField(verbose_name=_("attempts"))
    max_attempts = models.IntegerField(verbose_name=_("max attempts"))
    backoff_base = models.FloatField(verbose_name=_("backoff base"))
    lease = models.FloatField(verbose_name=_("lease"))
    unique_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("unique key")
    )
    concurrency_key = models.CharField(
        max_length=255, null=True, blank=True, verbose_name=_("concurrency key")
    )
    #: The error of the attempt before the last, if the job was retried.
    last_error = models.TextField(null=True, blank=True, verbose_name=_("last error"))
    enqueued_at = models.DateTimeField(verbose_name=_("enqueued at"))
    #: When the last attempt was claimed.
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=_("started at"))
    finished_at = models.DateTimeField(verbose_name=_("finished at"))
    #: Seconds the last attempt's handler ran (the worker's clock); None when not measured.
    duration = models.FloatField(null=True, blank=True, verbose_name=_("duration"))
    worker_id = models.CharField(max_length=255, null=True, blank=True, verbose_name=_("worker id"))
    #: "succeeded" or "cancelled" (jobs.HISTORY_STATES).
    outcome = models.CharField(max_length=20, verbose_name=_("outcome"))
    #: The handler's return value as JSON text, at most ALKQUEUE["MAX_OUTPUT_BYTES"].
    output = PayloadField(null=True, blank=True, verbose_name=_("output"))
    #: Why the output was not recorded (too large, not JSON); None when it was, or was None.
    output_error = models.TextField(null=True, blank=True, verbose_name=_("output error"))
    delete_after = models.DateTimeField(verbose_name=_("delete after"))

    class Meta:
        app_label = APP_LABEL
        db_table = HISTORY_TABLE
        verbose_name = _("finished job")
        verbose_name_plural = _("finished jobs")
        indexes = [
            models.Index(fields=["finished_at"], name="alkqueue_finished_at_idx"),
            models.Index(fields=["queue", "finished_at"], name="alkqueue_finished_queue_idx"),
            models.Index(fields=["delete_after"], name="alkqueue_finished_expiry_idx"),
            # Few rows: most jobs succeed, and most have no concurrency key.
            models.Index(
                fields=["finished_at"], condition=~Q(outcome="succeeded"),
                name=FINISHED_OTHER_INDEX,
            ),
            models.Index(
                fields=["concurrency_key"], condition=Q(concurrency_key__isnull=False),
                name=FINISHED_KEY_INDEX,
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} ({self.outcome})"

    # Django documents overriding a model's check; what it leaves out is in STAND_INS.
    @classmethod
    def check(cls, **kwargs: Any) -> list[checks.CheckMessage]:
        return without_stood_in(super().check(**kwargs), cls, kwargs.get("databases") or [])


class UniqueWindow(models.Model):
    """A unique key taken for a window (`unique_for`, docs/queues.md): written with the job
    that took it, kept after that job finished, deleted by the leader's sweep once lapsed."""

    queue = models.CharField(max_length=100, verbose_name=_("queue"))
    unique_key = models.CharField(max_length=255, verbose_name=_("unique key"))
    #: The job that took the key: live, finished, or gone.
    job_id = models.BigIntegerField(verbose_name=_("job id"))
    taken_at = models.DateTimeField(verbose_name=_("taken at"))
    lapses_at = models.DateTimeField(verbose_name=_("lapses at"))

    class Meta:
        app_label = APP_LABEL
        db_table = UNIQUE_WINDOW_TABLE
        verbose_name = _("unique window")
        verbose_name_plural = _("unique windows")
        constraints = [
            models.UniqueConstraint(fields=["queue", "unique_key"], name=UNIQUE_WINDOW_CONSTRAINT)
        ]
        indexes = [models.Index(fields=["lapses_at"], name=UNIQUE_WINDOW_LAPSE_INDEX)]

    def __str__(self) -> str:
        return f"{self.queue}:{self.unique_key} until {self.lapses_at}"


class Consumer(models.Model):
    """The handler bound to a queue. Unique on queue: the database refuses a second one."""

    queue = models.CharField(max_length=100, unique=True, verbose_name=_("queue"))
    handler = models.CharField(
        max_length=255, help_text=_("dotted path of the handler"), verbose_name=_("handler")
    )
    lease = models.FloatField(verbose_name=_("lease"))
    max_attempts = models.IntegerField(verbose_name=_("max attempts"))
    retry_policy = models.JSONField(default=dict, verbose_name=_("retry policy"))
    paused = models.BooleanField(default=False, verbose_name=_("paused"))
    #: The limits the code declares (@consumer), written by the worker at start-up, and the
    #: operator's overrides, which win until reset (limits.py; docs/flow-control.md). Both
    #: map a limit's name to its stored form; an override of None means "no limit".
    code_limits = models.JSONField(default=dict, blank=True, verbose_name=_("code limits"))
    limit_overrides = models.JSONField(default=dict, blank=True, verbose_name=_("limit overrides"))
    #: The operator's fair weights, {fair key: weight} (operations.set_fair_weight), which win
    #: over ALKQUEUE["QUEUES"][queue]["fair_weights"] (docs/fair-share.md).
    fair_weights = models.JSONField(
        default=dict, db_default={}, blank=True, verbose_name=_("fair weights")
    )
    #: The queue's payloads carry personal data (privacy.py), as the worker that wrote the
    #: row saw it: what a process without the consumer's code (the admin's) goes by.
    sensitive = models.BooleanField(default=False, db_default=False, verbose_name=_("sensitive"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        app_label = APP_LABEL
        db_table = CONSUMER_TABLE
        verbose_name = _("consumer")
        verbose_name_plural = _("consumers")
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

    worker_id = models.CharField(max_length=255, unique=True, verbose_name=_("worker id"))
    hostname = models.CharField(max_length=255, verbose_name=_("hostname"))
    pid = models.IntegerField(verbose_name=_("pid"))
    queues = models.JSONField(default=list, verbose_name=_("queues"))
    concurrency = models.IntegerField(verbose_name=_("concurrency"))
    started_at = models.DateTimeField(verbose_name=_("started at"))
    last_heartbeat_at = models.DateTimeField(verbose_name=_("last heartbeat at"))
    jobs_processed = models.BigIntegerField(default=0, verbose_name=_("jobs processed"))
    jobs_failed = models.BigIntegerField(default=0, verbose_name=_("jobs failed"))
    is_leader = models.BooleanField(default=False, verbose_name=_("is leader"))

    objects = WorkerQuerySet.as_manager()

    class Meta:
        app_label = APP_LABEL
        db_table = WORKER_TABLE
        verbose_name = _("worker")
        verbose_name_plural = _("workers")

    def __str__(self) -> str:
        return self.worker_id


#: The handler duration histogram's upper bounds (seconds), each with the QueueStat column
#: that counts the runs that took at most that long (a cumulative bucket, as Prometheus's).
DURATION_BUCKETS: tuple[tuple[float, str], ...] = (
    (0.005, "duration_le_5ms"),
    (0.025, "duration_le_25ms"),
    (0.1, "duration_le_100ms"),
    (0.5, "duration_le_500ms"),
    (1.0, "duration_le_1s"),
    (5.0, "duration_le_5s"),
    (30.0, "duration_le_30s"),
    (300.0, "duration_le_300s"),
)


class QueueStat(models.Model):
    """One row per queue per minute: the chart data of the admin overview and the metrics.

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
    #: Jobs put back for later by a handler's Snooze (not failures, not finished).
    snoozed = models.IntegerField(default=0)
    #: When the leader read the state counts above (None in a row only workers wrote), and
    #: the run_at of the oldest due job it found then: what the scrape reports per queue
    #: instead of counting the live table (docs/operations.md, "Metrics").
    read_at = models.DateTimeField(null=True, blank=True)
    oldest_pending_at = models.DateTimeField(null=True, blank=True)
    #: Also the leader's: live jobs waiting for their dependencies (not in `scheduled`), and
    #: due jobs flow control holds back (a part of `pending`, flow_status.throttled). A
    #: database default, so a row a worker inserts without naming them still holds 0.
    waiting = models.IntegerField(default=0, db_default=0)
    throttled = models.IntegerField(default=0, db_default=0)
    #: Failed attempts put back for another try (part of `failed`; the rest died).
    retried = models.IntegerField(default=0)
    #: Handler calls that ended in the minute (a batch consumer's call counts once), the
    #: seconds they took in all, and how many took at most each DURATION_BUCKETS bound: the
    #: one run-time histogram, read by /metrics/ and by the queue page's chart (timings.py).
    duration_count = models.IntegerField(default=0)
    duration_sum = models.FloatField(default=0.0)
    duration_le_5ms = models.IntegerField(default=0)
    duration_le_25ms = models.IntegerField(default=0)
    duration_le_100ms = models.IntegerField(default=0)
    duration_le_500ms = models.IntegerField(default=0)
    duration_le_1s = models.IntegerField(default=0)
    duration_le_5s = models.IntegerField(default=0)
    duration_le_30s = models.IntegerField(default=0)
    duration_le_300s = models.IntegerField(default=0)
    # The wait histogram (timings.py): attempts whose wait (from due to handler start) was
    # at most the bin's bound; wait_over: over an hour. Added by every worker with the
    # finished and failed counts. The run time is the duration_* histogram above.
    wait_10ms = models.IntegerField(default=0)
    wait_30ms = models.IntegerField(default=0)
    wait_100ms = models.IntegerField(default=0)
    wait_300ms = models.IntegerField(default=0)
    wait_1s = models.IntegerField(default=0)
    wait_3s = models.IntegerField(default=0)
    wait_10s = models.IntegerField(default=0)
    wait_30s = models.IntegerField(default=0)
    wait_1m = models.IntegerField(default=0)
    wait_5m = models.IntegerField(default=0)
    wait_15m = models.IntegerField(default=0)
    wait_1h = models.IntegerField(default=0)
    wait_over = models.IntegerField(default=0)

    class Meta:
        app_label = APP_LABEL
        db_table = QUEUE_STAT_TABLE
        # The admin index names the model after the page it opens: the queue overview.
        verbose_name = _("queue stat")
        verbose_name_plural = _("queue overview")
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
        app_label = APP_LABEL
        db_table = TASK_RESULT_TABLE
        indexes = [
            models.Index(
                fields=["expires_at"],
                name=RESULT_EXPIRY_INDEX,
                condition=Q(expires_at__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_path} #{self.job_id} ({self.status})"

    # Django documents overriding a model's check; what it leaves out is in STAND_INS.
    @classmethod
    def check(cls, **kwargs: Any) -> list[checks.CheckMessage]:
        return without_stood_in(super().check(**kwargs), cls, kwargs.get("databases") or [])


class PeriodicTick(models.Model):
    """The last tick enqueued for each periodic schedule. Advanced in the same transaction as
    the enqueue, so a tick is enqueued once even after its job has run and left the table."""

    name = models.CharField(max_length=200, unique=True, verbose_name=_("name"))
    #: None: the schedule is listed (the admin made its row) but has not ticked yet.
    last_tick = models.DateTimeField(null=True, blank=True, verbose_name=_("last tick"))
    #: A paused schedule's ticks pass without a job; resuming does not fire the missed ones.
    paused = models.BooleanField(default=False, verbose_name=_("paused"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        app_label = APP_LABEL
        db_table = PERIODIC_TICK_TABLE
        verbose_name = _("periodic schedule")
        verbose_name_plural = _("periodic schedules")
        permissions = [("pause_periodictick", "Can pause and resume periodic schedules")]

    def __str__(self) -> str:
        if self.last_tick is None:
            return f"{self.name} (not ticked yet)"
        return f"{self.name} @ {self.last_tick:%Y-%m-%d %H:%M:%S}"


class ClaimGate(models.Model):
    """One row per queue with limits: the row its claimers lock in turn, so that counting
    the live claims and taking new ones is one step at a time (docs/flow-control.md)."""

    queue = models.CharField(max_length=100, unique=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    #: The queue's fair clock: the turn of the last job a fair claim handed out (FairTurn).
    fair_clock = models.FloatField(default=0.0, db_default=0.0)

    class Meta:
        app_label = APP_LABEL
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
        app_label = APP_LABEL
        db_table = CLAIM_LEDGER_TABLE
        indexes = [
            models.Index(fields=["queue", "concurrency_key", "claimed_at"], name=CLAIM_LEDGER_INDEX)
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.concurrency_key} {self.count} @ {self.claimed_at}"


class FairTurn(models.Model):
    """A fair key's place in its queue's turns: the turn its next job starts from, kept only
    while ahead of the queue's fair clock (ClaimGate.fair_clock; a key without a row starts
    at the clock). Written under the queue's ClaimGate lock (sql/fair_turns.py)."""

    queue = models.CharField(max_length=100)
    #: "" for the jobs without a fair key (a fair key is never empty).
    fair_key = models.CharField(max_length=255)
    turn = models.FloatField()

    class Meta:
        app_label = APP_LABEL
        db_table = FAIR_TURN_TABLE
        constraints = [
            models.UniqueConstraint(fields=["queue", "fair_key"], name=FAIR_TURN_CONSTRAINT)
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.fair_key} @ {self.turn}"


#: The span of a FairClaims bucket, counted from the epoch (UTC): 12:00, 12:05, 12:10 ...
FAIR_CLAIMS_BUCKET = timedelta(minutes=5)
#: How long a bucket is kept: the leader's sweep deletes those that started before.
FAIR_CLAIMS_KEPT = timedelta(hours=2)


def fair_claims_bucket(at: datetime) -> datetime:
    """The start of the FairClaims bucket `at` falls in (an aware datetime)."""
    span = FAIR_CLAIMS_BUCKET.total_seconds()
    return datetime.fromtimestamp(at.timestamp() // span * span, at.tzinfo)


class FairClaimsQuerySet(models.QuerySet["FairClaims"]):
    def since(self, at: datetime) -> FairClaimsQuerySet:
        """The buckets that started after `at`."""
        return self.filter(bucket__gt=at)

    def older_than(self, at: datetime) -> FairClaimsQuerySet:
        """The buckets that started before `at` (alkqueue_fair_bucket_idx)."""
        return self.filter(bucket__lt=at)


class FairClaims(models.Model):
    """How many jobs the fair claims of a queue handed to a fair key in one bucket of
    FAIR_CLAIMS_BUCKET: what the admin's share of the last hour's claims adds up. Added to by
    each fair claim in its transaction (Dialect.add_fair_claims); the leader's sweep deletes
    the buckets older than FAIR_CLAIMS_KEPT."""

    queue = models.CharField(max_length=100)
    #: NO_FAIR_KEY for the jobs without a fair key.
    fair_key = models.CharField(max_length=255)
    bucket = models.DateTimeField()
    claims = models.IntegerField()

    objects = FairClaimsQuerySet.as_manager()

    class Meta:
        app_label = APP_LABEL
        db_table = FAIR_CLAIMS_TABLE
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "fair_key", "bucket"], name=FAIR_CLAIMS_CONSTRAINT
            )
        ]
        indexes = [models.Index(fields=["bucket"], name=FAIR_CLAIMS_BUCKET_INDEX)]

    def __str__(self) -> str:
        return f"{self.queue}/{self.fair_key} {self.claims} @ {self.bucket:%Y-%m-%d %H:%M}"


class CancelRequest(models.Model):
    """A claimed job cancelled while its handler runs: the live row is gone, and this marker
    stays until the worker's handler has stopped (the admin shows "cancel requested"). The
    worker deletes it; the leader's sweep deletes those of workers that are gone."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(unique=True, verbose_name=_("job id"))
    queue = models.CharField(max_length=100, verbose_name=_("queue"))
    #: The worker that held the claim (the live row's claimed_by).
    worker_id = models.CharField(max_length=255, verbose_name=_("worker id"))
    requested_at = models.DateTimeField(verbose_name=_("requested at"))

    class Meta:
        app_label = APP_LABEL
        db_table = CANCEL_REQUEST_TABLE
        verbose_name = _("cancel request")
        verbose_name_plural = _("cancel requests")

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id}"


class Batch(models.Model):
    """Jobs enqueued together in a `batch()` block, and the callbacks to enqueue when the last
    of them finishes. Members finish on their own rows (BatchMember): no ack writes here; the
    transaction that finishes the last member locks this row once, to fire (docs/workflows.md).
    """

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200, blank=True, default="", verbose_name=_("name"))
    created_at = models.DateTimeField(verbose_name=_("created at"))
    #: When the block ended: no member joins after it, and only then can the batch fire.
    sealed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("sealed at"))
    #: The callbacks, as workflows.specs.JobSpec.stored(); None when not given.
    on_success = models.JSONField(null=True, blank=True, verbose_name=_("on success"))
    on_finish = models.JSONField(null=True, blank=True, verbose_name=_("on finish"))
    #: When the last member finished and the callbacks were enqueued (once: never again).
    fired_at = models.DateTimeField(null=True, blank=True, verbose_name=_("fired at"))
    success_job_id = models.BigIntegerField(null=True, blank=True, verbose_name=_("on success job"))
    finish_job_id = models.BigIntegerField(null=True, blank=True, verbose_name=_("on finish job"))

    class Meta:
        app_label = APP_LABEL
        db_table = BATCH_TABLE
        verbose_name = _("batch")
        verbose_name_plural = _("batches")
        indexes = [
            # Open batches: what the leader's workflow sweep looks at.
            models.Index(
                fields=["created_at"],
                name=BATCH_OPEN_INDEX,
                condition=Q(fired_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name or _('batch')} #{self.id}"

    # Django documents overriding a model's check; what it leaves out is in STAND_INS.
    @classmethod
    def check(cls, **kwargs: Any) -> list[checks.CheckMessage]:
        return without_stood_in(super().check(**kwargs), cls, kwargs.get("databases") or [])

    def counts(self) -> BatchCounts:
        """How its members stand now: one query over the member index."""
        members = BatchMember.objects.using(self._state.db or "default").filter(batch_id=self.id)
        by_outcome = dict(
            members.values_list("outcome").annotate(n=models.Count("job_id")).order_by()
        )
        return BatchCounts(
            total=sum(by_outcome.values()),
            succeeded=by_outcome.get("succeeded", 0),
            dead=by_outcome.get("dead", 0),
            cancelled=by_outcome.get("cancelled", 0),
            pending=by_outcome.get(None, 0),
        )


class BatchCounts(NamedTuple):
    """A batch's members by how they stand: `pending` are still live (waiting, pending,
    scheduled or claimed)."""

    total: int
    succeeded: int
    dead: int
    cancelled: int
    pending: int


class BatchMember(models.Model):
    """One job of a batch, and how it finished: None while it is live, else "succeeded",
    "dead" or "cancelled". Written by the transaction that finishes the job."""

    job_id = models.BigIntegerField(primary_key=True, verbose_name=_("job id"))
    # No constraint in the database: MariaDB's check of one takes a shared lock on the Batch
    # row with every member update, and two last finishers then deadlock upgrading it.
    batch = models.ForeignKey(
        Batch,
        on_delete=models.CASCADE,
        related_name="members",
        db_constraint=False,
        verbose_name=_("batch"),
    )
    outcome = models.CharField(max_length=20, null=True, blank=True, verbose_name=_("outcome"))

    class Meta:
        app_label = APP_LABEL
        db_table = BATCH_MEMBER_TABLE
        verbose_name = _("batch member")
        verbose_name_plural = _("batch members")
        indexes = [models.Index(fields=["batch", "outcome"], name=BATCH_MEMBER_INDEX)]

    def __str__(self) -> str:
        return f"{self.batch_id}/{self.job_id}"


class Dependency(models.Model):
    """Job `job_id` runs only once job `depends_on` has succeeded (`met`). Kept while the
    dependent is live or dead, so that a requeue can make it wait again."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(verbose_name=_("job id"))
    depends_on = models.BigIntegerField(verbose_name=_("depends on"))
    met = models.BooleanField(default=False, verbose_name=_("met"))

    class Meta:
        app_label = APP_LABEL
        db_table = DEPENDENCY_TABLE
        verbose_name = _("dependency")
        verbose_name_plural = _("dependencies")
        constraints = [
            models.UniqueConstraint(
                fields=["job_id", "depends_on"], name="alkqueue_dependency_edge"
            )
        ]
        indexes = [models.Index(fields=["depends_on"], name=DEPENDENCY_INDEX)]

    def __str__(self) -> str:
        return f"{self.job_id} after {self.depends_on}"


class WaitingJob(models.Model):
    """A live job waiting for its dependencies, or for a signal (`job.wait_for`): its row's
    run_at is NULL (never due, so never claimed) and its own run_at is kept here until the
    release puts it back. For a signal, run_at is the wait's deadline (NULL when it has
    none) and `signal` names the signal."""

    job_id = models.BigIntegerField(primary_key=True, verbose_name=_("job id"))
    run_at = models.DateTimeField(null=True, verbose_name=_("run at"))
    #: The signal the job waits for (job.wait_for); None: it waits for its dependencies.
    signal = models.CharField(max_length=200, null=True, blank=True, verbose_name=_("signal"))

    class Meta:
        app_label = APP_LABEL
        db_table = WAITING_TABLE
        verbose_name = _("waiting job")
        verbose_name_plural = _("waiting jobs")
        indexes = [models.Index(fields=["signal", "run_at"], name=WAIT_DEADLINE_INDEX)]

    def __str__(self) -> str:
        return str(self.job_id)


class JobStep(models.Model):
    """A step a job's handler recorded with `job.step(name, fn)` (docs/durable-steps.md): its
    value, returned without calling `fn` again on every later run of that job. Keyed by the
    job's id, which the job keeps as a dead letter, requeued and in the history; deleted with
    the job."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(verbose_name=_("job id"))
    name = models.CharField(max_length=200, verbose_name=_("name"))
    #: The value fn returned, as JSON text (the payload's rules).
    value = PayloadField(verbose_name=_("value"))
    recorded_at = models.DateTimeField(verbose_name=_("recorded at"))
    #: The job's attempt that recorded it (its `attempts` then).
    attempt = models.IntegerField(verbose_name=_("attempt"))
    #: Seconds fn ran.
    duration = models.FloatField(verbose_name=_("duration"))

    class Meta:
        app_label = APP_LABEL
        db_table = STEP_TABLE
        verbose_name = _("job step")
        verbose_name_plural = _("job steps")
        constraints = [models.UniqueConstraint(fields=["job_id", "name"], name=STEP_CONSTRAINT)]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.name}"


class JobSignal(models.Model):
    """A signal sent to a job with `Queue.signal(job_id, name, payload)`
    (docs/durable-steps.md): what `job.wait_for(name)` returns. One per job and name, the
    first sent; deleted with the job, as its steps are."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField(verbose_name=_("job id"))
    name = models.CharField(max_length=200, verbose_name=_("name"))
    #: The signal's payload, as JSON text (the payload's rules).
    payload = PayloadField(verbose_name=_("payload"))
    sent_at = models.DateTimeField(verbose_name=_("sent at"))

    class Meta:
        app_label = APP_LABEL
        db_table = SIGNAL_TABLE
        verbose_name = _("job signal")
        verbose_name_plural = _("job signals")
        constraints = [models.UniqueConstraint(fields=["job_id", "name"], name=SIGNAL_CONSTRAINT)]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.name}"
