"""Deprecated: moved to django_alkqueue.reports.worker_report, whose public names this alias
re-exports."""

from ..deprecation import moved
from ..reports.worker_report import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.worker_report")
