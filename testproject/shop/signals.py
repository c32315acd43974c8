from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from django_alkqueue import enqueue

from .models import Order


@receiver(post_save, sender=Order)
def enqueue_invoice_report(sender: type[Order], instance: Order, created: bool, **kw: Any) -> None:
    """Runs inside the saving transaction, so the report job shares its fate."""
    if created:
        enqueue("shop-reports", {"order": instance.pk, "kind": "invoice"})
