"""Procrastinate with procrastinate.contrib.django; worker `procrastinate worker`."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "procrastinate.contrib.django"]
PROCRASTINATE_AUTODISCOVER_MODULE_NAME = ""
PROCRASTINATE_IMPORT_PATHS = ["bench.jobs.procrastinate_tasks"]
