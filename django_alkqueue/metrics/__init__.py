"""Deprecated: the Prometheus view moved to django_alkqueue.reports.metrics; its modules here
(urls, views, hour_sums) are aliases that warn when imported."""
