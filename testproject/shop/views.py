"""The ways a project enqueues: in the view's own transaction, from a signal, and from async
views."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from django_alkqueue import aenqueue, enqueue

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


def _place_order_atomically(request: HttpRequest) -> tuple[Order, int]:
    with transaction.atomic():
        return _create_order(request)


@csrf_exempt
@require_POST
async def place_order_async(request: HttpRequest) -> JsonResponse:
    """An async view that saves the order and enqueues its receipt in one transaction: the
    atomic block lives in a sync function, run through sync_to_async (docs/queues.md)."""
    order, job_id = await sync_to_async(_place_order_atomically)(request)
    return JsonResponse({"order": order.pk, "job": job_id})


@csrf_exempt
@require_POST
async def ping_async(request: HttpRequest) -> JsonResponse:
    """An async view that only enqueues: `aenqueue` commits on its own (autocommit)."""
    job = await aenqueue("shop-emails", {"to": request.POST.get("email", "ops@example.com")})
    return JsonResponse({"job": job.id})
