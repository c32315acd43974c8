"""Deprecated: moved to django_alkqueue.reports.flow_status, whose public names this alias
re-exports."""

from .deprecation import moved
from .reports.flow_status import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.flow_status")
