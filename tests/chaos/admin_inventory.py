"""What the admin security tests (test_09_admin_security.py) work on: a row of every kind
holding a secret and HTML/JS in every text it shows, users of every kind, and the inventory
of every page, action and form the alkqueue admin registers (read from the admin site, so
new pages and actions are covered as they are added)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, QueueStat, Worker

APP = "django_alkqueue"
SECRET = "alk-secret-7f3a"  # in payloads and errors: must never reach an unauthorised page
SCRIPT = '<script>alert("alk-xss")</script>'
ATTRIBUTE = '"><svg onload=alert("alk-attr")>'
QUEUE = 'q<img src=x onerror=alert("alk-q")>'  # no "/": the queue page's URL takes it whole
RAW = (SCRIPT, ATTRIBUTE, '<img src=x onerror=alert("alk-q")>')

# -- the rows and the users ------------------------------------------------------------------


def seed() -> dict[str, Model]:
    """One row of every kind, each carrying the secret and HTML/JS in every text it shows."""
    now = timezone.now()
    hostile = {"secret": SECRET, "script": SCRIPT, "attribute": ATTRIBUTE}
    stamps = {"max_attempts": 3, "backoff_base": 1.0, "lease": 30.0, "retention": None}
    pending = QueueMessage.objects.create(
        queue=QUEUE,
        payload=hostile,
        run_at=now,
        enqueued_at=now,
        unique_key=SCRIPT,
        concurrency_key=ATTRIBUTE,  # shown in the job list and the busiest keys
        last_error=f"{SECRET} {SCRIPT}",
        **stamps,
    )
    QueueMessage.objects.create(
        queue=QUEUE,
        payload=hostile,
        run_at=now,
        enqueued_at=now,
        attempts=1,
        claim_token=uuid.uuid4(),
        claimed_by=SCRIPT,
        claimed_at=now,
        lease_expires_at=now + timedelta(seconds=30),
        **stamps,
    )
    QueueMessage.objects.create(
        queue="shop-emails",
        payload={"n": 1},
        run_at=now + timedelta(hours=1),
        enqueued_at=now,
        **stamps,
    )
    dead = DeadLetter.objects.create(
        job_id=10_000,
        queue=QUEUE,
        payload=hostile,
        attempts=3,
        run_at=now,
        enqueued_at=now,
        claimed_by=ATTRIBUTE,
        died_at=now,
        reason=SCRIPT[:100],
        last_error=f"{SECRET} {SCRIPT}",
        unique_key=ATTRIBUTE,
        **stamps,
    )
    consumer = Consumer.objects.create(
        queue=QUEUE,
        handler=f"app.{SCRIPT}",
        lease=30,
        max_attempts=3,
        retry_policy={"note": SCRIPT},
        # limits in force: the queue page and the overview show their flow section
        limit_overrides={"key_concurrency": 1},
    )
    worker = Worker.objects.create(
        worker_id=SCRIPT,
        hostname=ATTRIBUTE,
        pid=1,
        queues=[QUEUE, SCRIPT],
        concurrency=4,
        started_at=now,
        last_heartbeat_at=now,
        is_leader=True,
    )
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    QueueStat.objects.create(queue=QUEUE, minute=minute, pending=1, finished=5, failed=1)
    return {"queuemessage": pending, "deadletter": dead, "consumer": consumer, "worker": worker}


def user(kind: str) -> User | None:
    if kind == "anonymous":
        return None
    if kind == "superuser":
        return User.objects.create_superuser("root", "root@example.com", "pw")
    staff = kind != "non-staff"
    account = User.objects.create_user(kind, f"{kind}@example.com", "pw", is_staff=staff)
    if kind == "non-staff":  # every permission, but not staff: the admin is still closed
        account.user_permissions.set(Permission.objects.filter(content_type__app_label=APP))
    return account


def client_as(kind: str, **options: Any) -> Client:
    client = Client(**options)
    account = user(kind)
    if account is not None:
        client.force_login(account)
    return client


# -- what there is to reach ------------------------------------------------------------------


def registered() -> list[tuple[str, admin.ModelAdmin[Any]]]:
    return [
        (model._meta.model_name, model_admin)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == APP
    ]


def changelist(name: str) -> str:
    return reverse(f"admin:{APP}_{name}_changelist")


def page_urls(rows: dict[str, Model]) -> list[str]:
    """Every page: the overview and the queue page, each changelist, each object's detail,
    history and delete pages, the add pages."""
    urls = [
        reverse("admin:index"),
        reverse("admin:app_list", args=[APP]),
        reverse(f"admin:{APP}_queuestat_queue", args=[QUEUE]),
    ]
    for name, _ in registered():
        urls.append(changelist(name))
        urls.append(f"{changelist(name)}?{urlencode({'queue': QUEUE})}")
        if name == "queuemessage":
            keyed = {"queue": QUEUE, "concurrency_key": ATTRIBUTE}
            urls.append(f"{changelist(name)}?{urlencode(keyed)}")
        row = rows.get(name)
        if row is not None:
            for view in ("change", "history", "delete"):
                urls.append(reverse(f"admin:{APP}_{name}_{view}", args=[row.pk]))
        urls.append(changelist(name) + "add/")
    return urls


def action_posts(rows: dict[str, Model]) -> list[tuple[str, dict[str, Any]]]:
    """Every action, confirmed, on a selection, on every matching row, and from the detail
    page; every edit, add and delete form."""
    posts: list[tuple[str, dict[str, Any]]] = []
    for name, model_admin in registered():
        row = rows.get(name)
        actions = [a if isinstance(a, str) else a.__name__ for a in model_admin.actions or ()]
        for action in [*actions, "delete_selected"]:
            base = {"action": action, "index": 0, "confirm": "yes", "post": "yes", "priority": 7}
            if row is not None:
                posts.append((changelist(name), {**base, "_selected_action": [row.pk]}))
                detail = reverse(f"admin:{APP}_{name}_change", args=[row.pk])
                posts.append(
                    (
                        detail,
                        {
                            "CHANGE_FORM-action": action,
                            "_selected_action": row.pk,
                            "confirm": "yes",
                            "priority": 7,
                        },
                    )
                )
            posts.append((changelist(name), {**base, "select_across": 1, "_selected_action": [0]}))
        if row is not None:
            posts.append(
                (
                    reverse(f"admin:{APP}_{name}_change", args=[row.pk]),
                    {"queue": "x", "paused": "on", "priority": 9, "handler": "x"},
                )
            )
            posts.append((reverse(f"admin:{APP}_{name}_delete", args=[row.pk]), {"post": "yes"}))
        posts.append((changelist(name) + "add/", {"queue": "x", "handler": "x", "lease": 1}))
    return posts


def snapshot() -> list[list[dict[str, Any]]]:
    return [
        list(m.objects.order_by("pk").values())
        for m in (QueueMessage, DeadLetter, Consumer, Worker, QueueStat)
    ]
