"""`path("metrics/", include("django_alkqueue.reports.metrics.urls"))`: the view is off unless
included."""

from __future__ import annotations

from django.urls import path

from .views import metrics

app_name = "django_alkqueue_metrics"
urlpatterns = [path("", metrics, name="metrics")]
