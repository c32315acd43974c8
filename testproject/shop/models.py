from django.db import models


class Order(models.Model):
    """A shop order: saving one enqueues jobs (in a view, and from a post_save receiver)."""

    customer_email = models.EmailField()
    total_cents = models.IntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"order {self.pk} for {self.customer_email}"


class HandlerRun(models.Model):
    """A row per handler execution, written by the demo and test consumers."""

    queue = models.CharField(max_length=100)
    job_id = models.BigIntegerField()
    attempt = models.IntegerField()
    worker = models.CharField(max_length=255, blank=True, default="")
    note = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.queue}#{self.job_id} attempt {self.attempt}"


class LedgerEntry(models.Model):
    """Written by the atomic consumer: commits together with the job's ack, or not at all."""

    job_id = models.BigIntegerField()
    amount_cents = models.IntegerField()

    def __str__(self) -> str:
        return f"ledger {self.job_id}: {self.amount_cents}"
