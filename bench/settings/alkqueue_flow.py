"""django-alkqueue's flow-control bench (bench/flow_control.py): its queues' consumers only."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_flow_consumers"]}
