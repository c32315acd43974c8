"""The scrape: who may read it, then the exposition of a registry holding only our collector."""

from __future__ import annotations

import hmac

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ...clock import system_clock
from ...conf import get_settings

#: What a staff user needs without the token: the view permission of the queue overview.
PERMISSION = "django_alkqueue.view_queuestat"


def allowed(request: HttpRequest) -> bool:
    """The bearer token of ALKQUEUE["METRICS_TOKEN"], or a staff user with PERMISSION."""
    token = get_settings().METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token is not None and header.startswith("Bearer "):
        return hmac.compare_digest(header.removeprefix("Bearer ").encode(), token.encode())
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(PERMISSION))


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        refused = HttpResponse(
            "metrics: a bearer token or a staff login with the "
            f"{PERMISSION} permission is needed\n",
            status=403,
            content_type="text/plain",
        )
        user = getattr(request, "user", None)
        if not request.headers.get("Authorization") and not (user and user.is_authenticated):
            refused.status_code = 401
            refused["WWW-Authenticate"] = 'Bearer realm="alkqueue"'
        return refused
    try:  # optional: the metrics extra
        from prometheus_client import CONTENT_TYPE_LATEST
    except ImportError:
        raise ImproperlyConfigured(
            "django_alkqueue.reports.metrics needs prometheus_client: "
            "pip install 'django-alkqueue[metrics]'"
        ) from None
    # App-registry timing: a URLconf loads this view even where the app is missing (E103),
    # and the collector imports the Tasks backend, which then refuses to load (E102).
    from .collector import scrape

    body = scrape(get_settings().DATABASE, system_clock())
    return HttpResponse(body.encode(), content_type=CONTENT_TYPE_LATEST)
