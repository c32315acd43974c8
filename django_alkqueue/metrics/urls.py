"""Deprecated: moved to django_alkqueue.reports.metrics.urls, whose public names this alias
re-exports."""

from ..deprecation import moved
from ..reports.metrics.urls import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.metrics.urls")
