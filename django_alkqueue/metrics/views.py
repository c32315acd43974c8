"""Deprecated: moved to django_alkqueue.reports.metrics.views, whose public names this alias
re-exports."""

from ..deprecation import moved
from ..reports.metrics.views import *  # noqa: F403

moved(__name__, "django_alkqueue.reports.metrics.views")
