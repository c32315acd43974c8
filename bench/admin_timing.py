"""Server time of the django-alkqueue admin pages with a big table: Django's test client in
this process (request handling, queries and template rendering; no network, no browser).

Measured only when the admin exists in the tree (django_alkqueue registers ModelAdmins);
otherwise the figure says so."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from . import common

NOT_BUILT = "not measured: admin not built yet"
REPS = 5


def _registered() -> dict[str, str]:
    """Admin pages to time, by name -> URL, from what django_alkqueue registers."""
    from django.contrib import admin
    from django.urls import NoReverseMatch, reverse

    pages: dict[str, str] = {}
    for model in admin.site._registry:
        if model._meta.app_label == "django_alkqueue":
            name = f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"
            # The QueueStat changelist is the overview page (admin/overview.py).
            label = "overview" if model._meta.model_name == "queuestat" else model._meta.model_name
            pages[f"{label} changelist" if label != "overview" else label] = reverse(name)
    with contextlib.suppress(NoReverseMatch):
        pages["overview of one queue"] = reverse(
            "admin:django_alkqueue_queuestat_queue", kwargs={"name": "scale"}
        )
    for pattern in _url_names(admin.site.get_urls()):
        if "overview" in pattern:
            try:
                pages["overview"] = reverse(f"admin:{pattern}")
            except NoReverseMatch:
                continue
    return pages


def _url_names(patterns: list[Any]) -> list[str]:
    names = []
    for p in patterns:
        if hasattr(p, "url_patterns"):
            names += _url_names(p.url_patterns)
        elif getattr(p, "name", None):
            names.append(p.name)
    return names


def _client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user_model = get_user_model()
    user = user_model.objects.filter(username="bench").first()
    if user is None:
        user = user_model.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    return client


def measure(which: str) -> dict[str, Any]:
    """`which`: "jobs" (the job changelist and the overview) or "dead_letters"."""
    try:
        pages = _registered()
    except Exception as exc:  # an admin half-built by a concurrent change
        return {"measured": False, "reason": f"not measured: {exc!r}"}
    if not pages:
        return {"measured": False, "reason": NOT_BUILT}
    wanted = {
        "jobs": lambda n: "deadletter" not in n,
        "dead_letters": lambda n: "deadletter" in n,
    }[which]
    client = _client()
    out: dict[str, Any] = {"measured": True, "pages": {}}
    for name, url in pages.items():
        if not wanted(name):
            continue
        timings, status = [], None
        for i in range(REPS + 1):
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            status = response.status_code
            if i:  # the first request warms caches and imports
                timings.append(elapsed)
        out["pages"][name] = {"url": url, "status": status, "ms": common.figure(timings)}
    return out
