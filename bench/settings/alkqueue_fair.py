"""django-alkqueue's fair-share bench (bench/fair_share.py): its queues' consumers only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_fair_consumers"]}
