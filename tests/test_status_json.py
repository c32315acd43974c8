"""`alk_status --json`: timestamps in ISO 8601, as JSON readers parse them."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_alkqueue.models import Worker

pytestmark = pytest.mark.django_db


def test_json_timestamps_are_iso_8601():
    started = timezone.now().replace(microsecond=189404)
    Worker.objects.create(worker_id="web-1", hostname="web1", pid=25324, queues=["shop-emails"],
                          concurrency=4, started_at=started, last_heartbeat_at=started)  # fmt: skip
    out = io.StringIO()

    call_command("alk_status", "--json", stdout=out)

    (worker,) = json.loads(out.getvalue())["workers"]
    assert worker["started_at"] == started.isoformat()
    assert worker["last_heartbeat_at"] == started.isoformat()
    assert "T" in worker["started_at"]
    assert datetime.fromisoformat(worker["started_at"]) == started
