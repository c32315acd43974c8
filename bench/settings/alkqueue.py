"""django-alkqueue, as its workers run: the bench consumer, nothing else installed."""

import os

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_alkqueue"]

ALKQUEUE = {"CONSUMER_MODULES": ["bench.jobs.alkqueue_consumers"]}
if os.environ.get("BENCH_ACK_WINDOW"):
    ALKQUEUE["ACK_WINDOW"] = float(os.environ["BENCH_ACK_WINDOW"])
