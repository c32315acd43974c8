"""The Prometheus exposition view: include `django_alkqueue.reports.metrics.urls` in the
project's URLconf to turn it on (docs/operations.md, "Metrics"). Needs the `metrics` extra
(prometheus_client), imported only when the view is called."""
