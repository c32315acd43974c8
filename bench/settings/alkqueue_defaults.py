"""django-alkqueue's defaults bench (bench/defaults.py): its no-op and two-second consumers."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_defaults_consumers"]}
