"""django-alkqueue's cancel-latency bench (bench/cancel_latency.py): its one consumer only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_cancel_consumers"]}
