"""Deprecated: moved to django_alkqueue.reports.database_health, whose public names this alias
re-exports."""

from ..deprecation import moved
from ..reports.database_health import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.database_health")
