"""django-alkqueue's kept-history bench (bench/kept_history.py): its two no-op consumers only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_kept_consumers"]}
