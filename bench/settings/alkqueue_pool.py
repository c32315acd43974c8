"""django-alkqueue's process-pool bench (bench/process_pool.py): its one no-op consumer only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_pool_consumers"]}
