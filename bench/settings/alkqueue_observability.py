"""django-alkqueue's observability bench (bench/observability.py): the worker settings plus
the metrics view, opened by the bearer token BENCH_METRICS_TOKEN. Its own URLconf."""

import os

from django.urls import include, path

from .alkqueue import *  # noqa: F403
from .alkqueue import ALKQUEUE

ALKQUEUE = {**ALKQUEUE, "METRICS_TOKEN": os.environ.get("BENCH_METRICS_TOKEN")}
ROOT_URLCONF = "bench.settings.alkqueue_observability"
urlpatterns = [path("metrics/", include("django_alkqueue.reports.metrics.urls"))]
