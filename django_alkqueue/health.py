"""Deprecated: moved to django_alkqueue.reports.health, whose public names this alias re-exports."""

from .deprecation import moved
from .reports.health import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.health")
