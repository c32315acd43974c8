"""Deprecated: moved to django_alkqueue.reports.metrics.hour_sums, whose public names this alias
re-exports."""

from ..deprecation import moved
from ..reports.metrics.hour_sums import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.metrics.hour_sums")
