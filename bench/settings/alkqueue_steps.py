"""django-alkqueue's durable steps bench (bench/durable_steps.py): its consumers only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_steps_consumers"]}
