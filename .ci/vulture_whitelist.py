"""Names that look unused to vulture (make lint) and are not: each is used from outside
Python's reach. A new entry says where it is used from; dead code is deleted, not listed."""

# ruff: noqa
from django_alkqueue import apps, testing
from django_alkqueue.sql.postgresql import wake_pacing

_ = object()

# Read by the admin's templates (django_alkqueue/templates/).
_.heading  # charts.Chart
_.estimated, _.at_least  # counts: the paginator's count
_.handler_name, _.slow  # overview's rows
_.first_seen, _.last_seen, _.group_query  # reports/frequent_errors.ErrorGroup
_.keys_masked  # reports/flow_status
_.share_percent  # admin/fair_weights.KeyRow

# Fields of dataclasses written out whole (dataclasses.asdict: alk_status --json, alk_health
# --json, the overview's context).
_.subject  # reports/health.Problem
_.served, _.limit_sources  # reports/status.QueueRow
# reports/queue_stats.Throughput
_.finished_5m, _.failed_5m, _.finished_1h, _.failed_1h, _.snoozed_1h
_.dead_lettered

# Loaded by Django by name: the AppConfig (INSTALLED_APPS), the pytest plugin's fixture (the
# django_alkqueue.testing entry point).
apps.AlkQueueConfig
testing.alkqueue

# Called by the test suite (tests/conftest.py) before each test: the NOTIFY window is kept per
# Django connection object, which outlives a test. It looked used while LimitsCache.forget
# (flow state: now the worker's) shared its name.
wake_pacing.forget

# The public API (docs/reference.md): called by users, not by the library.
_.claim_one, _.aenqueue_many, _.aget_job, _.acancel, _.arequeue, _.asignal  # queues.Queue
_.remaining, _.check_cancelled, _.astep  # running.RunningJob

# Model fields only SQL or getattr(row, name) reads and writes (sql/, timings.py).
_.in_workflow, _.error_fingerprint, _.delete_after, _.requested_at, _.crashes
_.recorded_at  # models.JobStep (sql/: record_step)
_.sent_at  # models.JobSignal (waits.send writes it by keyword)
_.debounce_deadline
_.success_job_id, _.finish_job_id
_.duration_count, _.duration_sum, _.duration_le_5ms, _.duration_le_25ms, _.duration_le_100ms
_.duration_le_500ms, _.duration_le_1s, _.duration_le_5s, _.duration_le_30s, _.duration_le_300s
_.wait_10ms, _.wait_30ms, _.wait_100ms, _.wait_300ms, _.wait_1s, _.wait_3s, _.wait_10s
_.wait_30s, _.wait_1m, _.wait_5m, _.wait_15m, _.wait_1h, _.wait_over

# The durable steps' table (docs/durable-steps.md): the migration creates it from the model;
# only sql/ reads and writes it, by its table name.
_.JobStep

# Called by the Tasks framework's users on the results this backend returns:
# `await result.arefresh()` (backend.StoredTaskResult, as Django's TaskResult.arefresh).
_.arefresh
_.clean_name, _.clean_payload  # admin/signal_form.SignalForm: Django's form calls them
