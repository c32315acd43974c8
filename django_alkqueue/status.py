"""Deprecated: moved to django_alkqueue.reports: its status, queue_stats (the QueueStat minutes,
the leader's readings) and frequent_errors, whose public names this alias re-exports."""

from .deprecation import moved
from .reports.frequent_errors import *  # noqa: F403
from .reports.queue_stats import *  # noqa: F403
from .reports.status import *  # noqa: F403

moved(__name__, "django_alkqueue.reports (status, queue_stats, frequent_errors)")
