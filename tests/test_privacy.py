"""Payload privacy outside the admin: which queues are sensitive, how a payload is masked, and
`alk_status` never printing a payload (docs/security.md)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_alkqueue import InvalidOption, consumer, queue
from django_alkqueue.consumers import registry
from django_alkqueue.privacy import MASK, is_sensitive, masked
from django_alkqueue.reports.status import QueueRow, WorkerRow

SECRET = "4111-1111-1111-1111"


@pytest.fixture
def private_queue() -> Iterator[str]:
    """A queue whose @consumer says sensitive=True, unregistered after the test."""
    name = "private-queue"
    consumer(name, sensitive=True)(lambda payload, job: None)
    yield name
    registry.unregister(name)


# -- which queues are sensitive ---------------------------------------------------------------


def test_a_queue_is_not_sensitive_by_default():
    assert is_sensitive("plain-queue") is False


def test_a_consumer_with_sensitive_true_makes_its_queue_sensitive(private_queue):
    assert is_sensitive(private_queue) is True


def test_the_queues_setting_makes_a_queue_without_a_consumer_sensitive():
    with override_settings(ALKQUEUE={"QUEUES": {"payments": {"sensitive": True}}}):
        assert is_sensitive("payments") is True
        assert is_sensitive("other") is False


def test_the_queues_setting_cannot_unmark_a_consumers_sensitive_queue(private_queue):
    with override_settings(ALKQUEUE={"QUEUES": {private_queue: {"sensitive": False}}}):
        assert is_sensitive(private_queue) is True


@pytest.mark.parametrize("value", [1, "yes", None])
def test_consumer_refuses_a_sensitive_that_is_not_a_bool(value):
    with pytest.raises(InvalidOption, match="sensitive must be True or False"):
        consumer("never-registered", sensitive=value)
    assert registry.get("never-registered") is None


# -- masking ----------------------------------------------------------------------------------


def test_masked_keeps_the_keys_and_hides_every_value():
    payload = {"card": SECRET, "amount": 12.5, "items": [{"sku": "A1"}, 3], "gift": None}
    assert masked(payload) == {"card": MASK, "amount": MASK, "items": [{"sku": MASK}, MASK],
                               "gift": MASK}  # fmt: skip


@pytest.mark.parametrize("payload", [SECRET, 42, True, None, 1.5])
def test_a_scalar_payload_is_masked_whole(payload):
    assert masked(payload) == MASK


def test_masking_leaves_the_payload_itself_unchanged():
    payload = {"card": SECRET}
    masked(payload)
    assert payload == {"card": SECRET}


# -- alk_status -------------------------------------------------------------------------------


def test_status_rows_have_no_field_for_payloads_or_error_texts():
    for row in (QueueRow, WorkerRow):
        fields = {field.name for field in dataclasses.fields(row)}
        assert not fields & {"payload", "payloads", "last_error", "error", "errors"}


@pytest.mark.django_db
@pytest.mark.parametrize("as_json", [False, True])
def test_alk_status_never_prints_a_sensitive_queues_payload_or_errors(private_queue, as_json):
    q = queue(private_queue)
    q.enqueue({"card": SECRET})
    q.enqueue({"card": SECRET})
    [handle] = q.claim("w")
    handle.fail(f"declined card {SECRET}")
    out = io.StringIO()

    call_command("alk_status", *(["--json"] if as_json else []), stdout=out)

    assert private_queue in out.getvalue()  # the queue is listed, with its counts
    assert SECRET not in out.getvalue()
