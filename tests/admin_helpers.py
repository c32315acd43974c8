"""Shared set-up of the admin tests: users with chosen permissions and a seeded database.
Plain functions (no tests here); each admin test module wraps them in its fixtures."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, Worker

ADMIN = "/admin/django_alkqueue"
JOBS = f"{ADMIN}/queuemessage/"
DEAD = f"{ADMIN}/deadletter/"
CONSUMERS = f"{ADMIN}/consumer/"
WORKERS = f"{ADMIN}/worker/"
OVERVIEW = f"{ADMIN}/queuestat/"
#: No admin page is larger than this (docs/security.md, "Sizes"), whatever the rows hold.
PAGE_BYTES_MAX = 4 * 1024 * 1024
VIEW_PERMS = [
    "view_queuemessage",
    "view_deadletter",
    "view_consumer",
    "view_worker",
    "view_queuestat",
]
ACTION_PERMS = [
    "cancel_queuemessage",
    "run_now_queuemessage",
    "change_priority_queuemessage",
    "signal_queuemessage",
    "requeue_deadletter",
    "delete_deadletter",
    "pause_consumer",
    "resume_consumer",
]


def queue_url(name: str) -> str:
    return f"{OVERVIEW}queue/{name}/"


def make_user(username: str, *codenames: str, superuser: bool = False) -> User:
    if superuser:
        return User.objects.create_superuser(username, f"{username}@example.com", "pw")
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    perms = Permission.objects.filter(
        content_type__app_label="django_alkqueue", codename__in=codenames
    )
    assert perms.count() == len(codenames), codenames
    user.user_permissions.set(perms)
    return user


def client_for(user: User, **kwargs: object) -> Client:
    client = Client(**kwargs)  # type: ignore[arg-type]
    client.force_login(user)
    return client


@dataclasses.dataclass
class Seeded:
    pending: list[int]
    scheduled: list[int]
    claimed: list[int]
    dead: list[int]  # job ids of the dead letters


def dead_lettered(name: str, payload: object, error: str, worker: str = "w-dead") -> int:
    """A job of `name` that is a dead letter now; returns its job id."""
    q = queue(name)
    job = q.enqueue(payload, priority=100)  # claimed first, whatever else waits
    handle = q.claim_one(worker)
    assert handle is not None and handle.job.id == job.id
    assert handle.fail(error)
    return job.id


def seed(pending: int = 3, dead: int = 2) -> Seeded:
    """shop-emails: pending, scheduled and claimed jobs; shop-webhooks (paused): dead letters."""
    Consumer.objects.create(
        queue="shop-emails",
        handler="testproject.shop.consumers.send_email",
        lease=30,
        max_attempts=3,
        retry_policy={"backoff": "constant"},
    )
    Consumer.objects.create(
        queue="shop-webhooks",
        handler="testproject.shop.consumers.deliver_webhook",
        lease=30,
        max_attempts=2,
        paused=True,
    )
    emails = queue("shop-emails")
    for i in range(2):
        emails.enqueue({"to": f"claimed{i}@example.com"}, priority=50)
    claimed = [h.job.id for h in emails.claim("w-live", 2)]
    pending_ids = [
        j.id for j in emails.enqueue_many([{"to": f"p{i}@example.com"} for i in range(pending)])
    ]
    scheduled = [emails.enqueue({"to": "later@example.com"}, delay=3600).id]
    dead_ids = [
        dead_lettered(
            "shop-webhooks",
            {"url": f"https://example.com/{i}"},
            f"ConnectionError: refused {i % 2}\n\nTraceback (most recent call last): ...",
        )
        for i in range(dead)
    ]
    return Seeded(pending_ids, scheduled, claimed, dead_ids)


def add_worker(worker_id: str, *, stale: bool = False) -> Worker:
    now = timezone.now()
    beat = now - timedelta(minutes=10) if stale else now
    return Worker.objects.create(
        worker_id=worker_id,
        hostname="host",
        pid=1,
        queues=["shop-emails"],
        concurrency=4,
        started_at=now - timedelta(hours=1),
        last_heartbeat_at=beat,
        jobs_processed=7,
        jobs_failed=1,
    )


def live_ids() -> set[int]:
    return set(QueueMessage.objects.values_list("id", flat=True))


def dead_job_ids() -> set[int]:
    return set(DeadLetter.objects.values_list("job_id", flat=True))
