"""Server time of the django-alkqueue admin pages with a big table: Django's test client in
this process (request handling, queries and template rendering; no network, no browser).
The pages are the changelists of the app's registered models, the QueueStat one being the
overview, and the overview of the scale queue where the admin has one."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from . import common

REPS = 5


def _pages() -> dict[str, str]:
    """Admin pages to time, by name -> URL, from the models django_alkqueue registers."""
    from django.apps import apps
    from django.contrib import admin
    from django.urls import NoReverseMatch, reverse

    pages: dict[str, str] = {}
    for model in apps.get_app_config("django_alkqueue").get_models():
        if not admin.site.is_registered(model):
            continue
        name = model._meta.model_name
        label = "overview" if name == "queuestat" else f"{name} changelist"
        pages[label] = reverse(f"admin:django_alkqueue_{name}_changelist")
    with contextlib.suppress(NoReverseMatch):
        pages["overview of one queue"] = reverse(
            "admin:django_alkqueue_queuestat_queue", kwargs={"name": "scale"}
        )
    return pages


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
    """`which`: "jobs" (every page but the dead letters') or "dead_letters"."""
    try:
        pages = _pages()
    except Exception as exc:  # an admin half-built by a concurrent change
        return {"measured": False, "reason": f"not measured: {exc!r}"}
    if not pages:
        return {"measured": False, "reason": "not measured: no admin registered"}
    wanted: Callable[[str], bool] = {
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
