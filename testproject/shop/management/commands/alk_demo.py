"""`manage.py alk_demo`: enqueue a realistic batch the ways a project does, drain it with a
real `alk_worker --burst`, and show what happened per queue."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.test import Client

from django_alkqueue import enqueue
from testproject.shop.models import Order


class Command(BaseCommand):
    help = "Enqueue a demo batch, drain it with alk_worker --burst, print the summary."

    def handle(self, *args: Any, **options: Any) -> None:
        client = Client(raise_request_exception=False)
        # The view saves an order and enqueues its receipt email in one transaction; the
        # post_save receiver enqueues an invoice report in the same transaction.
        for i in range(40):
            client.post("/orders/", {"email": f"customer{i}@example.com", "total_cents": 1999})
        # These views raise after enqueueing: order and jobs vanish with the rollback.
        request_log = logging.getLogger("django.request")
        level, request_log.level = request_log.level, logging.CRITICAL  # expected 500s
        for i in range(5):
            client.post("/orders/fail/", {"email": f"declined{i}@example.com"})
        request_log.setLevel(level)
        self.stdout.write(
            f"orders saved: {Order.objects.count()} (5 more were rolled back with their jobs)"
        )
        for i in range(20):  # flaky endpoint: fails once, then succeeds
            enqueue("shop-emails", {"to": f"retry{i}@example.com", "fail_times": 1})
        for i in range(3):  # the address does not exist: outside retry_on, dead at once
            enqueue("shop-emails", {"to": f"nobody{i}@example.invalid", "permanent": True})
        for i in range(10):
            enqueue("shop-webhooks", {"url": f"https://example.com/hook/{i}"})
        for i in range(2):  # the receiver is down for good: retried, then dead
            enqueue("shop-webhooks", {"url": f"https://down.example.com/{i}", "fail_times": 9})
        enqueue("shop-reports", {"kind": "monthly", "fail": "report template missing"})
        for i in range(5):  # atomic: the ledger row and the ack commit together
            enqueue("shop-ledger", {"amount": 100 * (i + 1)})
        self.stdout.write("draining with: manage.py alk_worker --burst --concurrency 4\n")
        call_command("alk_worker", burst=True, concurrency=4, verbosity=0, stdout=self.stdout)
        self.stdout.write("\nmanage.py alk_status\n")
        call_command("alk_status", stdout=self.stdout)
        user_model = get_user_model()
        if not user_model.objects.filter(username="admin").exists():
            user_model.objects.create_superuser("admin", "admin@example.com", "admin")
        self.stdout.write(
            "Open the admin: run `make admin`, then visit http://127.0.0.1:8000/admin/ "
            "(user admin, password admin)."
        )
