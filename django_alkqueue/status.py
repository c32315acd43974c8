"""Deprecated: moved to django_alkqueue.reports.status, whose public names this alias re-exports."""

from .deprecation import moved
from .reports.status import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.status")
