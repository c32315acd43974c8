"""The two ways a project enqueues: in the view's own transaction, and from a signal."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from django_alkqueue import enqueue

from .models import Order


def _create_order(request: HttpRequest) -> tuple[Order, int]:
    order = Order.objects.create(
        customer_email=request.POST.get("email", "customer@example.com"),
        total_cents=int(request.POST.get("total_cents", "1000")),
    )
    job = enqueue(
        "shop-emails", {"order": order.pk, "to": order.customer_email, "template": "receipt"}
    )
    return order, job.id


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Saves the order and enqueues its receipt email in one transaction."""
    with transaction.atomic():
        order, job_id = _create_order(request)
    return JsonResponse({"order": order.pk, "job": job_id})


class PaymentDeclined(Exception):
    pass


@csrf_exempt
@require_POST
def place_order_then_fail(request: HttpRequest) -> JsonResponse:
    """Raises after the enqueue: the order and its job vanish together with the rollback."""
    with transaction.atomic():
        _create_order(request)
        raise PaymentDeclined("card declined after the order was saved")
