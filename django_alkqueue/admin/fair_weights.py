"""The queue page's fair share section (docs/fair-share.md): the fair keys with unclaimed
jobs, their weights and their share of the last hour's claims, and the form with which an
operator who may change consumers sets a key's weight (job_actions.set_fair_weight,
audited)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _

from .. import fair_share, job_actions
from ..exceptions import InvalidName, InvalidOption
from ..models import Consumer
from ..privacy import masked_key
from .audit import actor
from .masking import hidden_queues
from .permissions import has_perm


def may_set_weights(request: HttpRequest) -> bool:
    return has_perm(request, Consumer, "change_consumer")


@dataclasses.dataclass(frozen=True)
class KeyRow:
    """A row of the section: the key as the user may see it ("" for the jobs without a fair
    key, which the page calls "(no key)"), and its share of the last hour's claims in percent
    (None: the queue had no fair claims in the hour)."""

    key: str
    unclaimed: int | None
    weight: int
    share_percent: float | None


def fair_context(
    request: HttpRequest, using: str, name: str, consumer: Any, now: datetime
) -> dict[str, Any]:
    """What the section shows: the keys (masked on a queue whose keys the user may not see)
    and whether the form is offered (a Consumer row holds the weights)."""
    stored = None if consumer is None else consumer.fair_weights
    hidden = name in hidden_queues(request)
    rows = [
        KeyRow(
            (masked_key(k.key) or "") if hidden and k.key else k.key,
            k.unclaimed,
            k.weight,
            None if k.share is None else k.share * 100,
        )
        for k in fair_share.keys_with_jobs(name, stored, now, using=using)
    ]
    return {
        "fair_keys": rows,
        "can_set_fair_weight": consumer is not None and may_set_weights(request),
    }


def set_weight(request: HttpRequest, using: str, name: str) -> HttpResponse:
    """The form's POST: set (or, with an empty weight, drop) one key's weight, then back to
    the queue page with a message."""
    if not may_set_weights(request):
        raise PermissionDenied
    key = request.POST.get("fair_key", "")
    text = request.POST.get("weight", "").strip()
    try:
        if text and not text.isdigit():
            raise InvalidOption(f"a fair weight must be a whole number, not {text[:20]!r}")
        weight = int(text) if text else None
        now = job_actions.set_fair_weight(using, name, key, weight, actor(request))
    except InvalidName as refused:
        # No queue can have this name, so no page holds this form: as the page's GET does.
        raise Http404(str(refused)) from None
    except InvalidOption as refused:
        messages.error(request, _("The weight was not set: %(why)s") % {"why": refused})
    else:
        messages.success(
            request, _("Fair key %(key)s now has weight %(weight)s.") % {"key": key, "weight": now}
        )
    return HttpResponseRedirect(request.path)
