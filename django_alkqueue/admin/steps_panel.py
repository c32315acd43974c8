"""The Steps section of a job's page (live job, dead letter, finished job): the durable steps
its handler recorded (docs/durable-steps.md), each with when it was recorded, how long its
function ran, the attempt that recorded it and its value, shown as the payload is: masked
for a user who may not see the queue's payloads (masking.py). A job without steps has no
section; the section costs the page one query. The records of a sleep and of a wait
(job.sleep, job.wait_for) are read out in words beside their values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..models import JobStep
from ..reports.formats import format_age
from ..steps import SIGNAL, SLEEP_UNTIL, TIMED_OUT
from .masking import may_view_payload
from .stored_text import masked_json, pretty_json
from .times import when

#: The most steps the section lists: the last ones recorded.
STEPS_SHOWN = 100


def ran_for(seconds: float) -> str:
    """How long a step's function ran: milliseconds under 10 s, else an age."""
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else format_age(seconds)


def reading(name: str, value: Any) -> SafeString | str | None:
    """What a sleep's or a wait's record says, in words: "sleeps until <time>", "signal 'x'
    received", "timed out at <time>"; None for the value of any other step. The records of
    job.sleep and job.wait_for are one-key objects (steps.py)."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((key, text),) = value.items()
    if key == SIGNAL:
        return _("signal %(name)s received") % {"name": repr(name)}
    if key not in (SLEEP_UNTIL, TIMED_OUT) or not isinstance(text, str):
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    words = _("sleeps until %(time)s") if key == SLEEP_UNTIL else _("timed out at %(time)s")
    return format_html(words.replace("%(time)s", "{}"), when(at))


def steps_panel(
    request: HttpRequest,
    using: str,
    job_id: int,
    queue: str,
    requeue_url: Callable[[str], str] | None = None,
) -> SafeString | None:
    """The section's HTML, or None when the job recorded no step. `requeue_url`, where the
    user may requeue the job from a step, gives the URL that asks to, for a step's name."""
    rows = JobStep.objects.using(using).filter(job_id=job_id).order_by("-recorded_at", "-id")
    steps = list(rows[: STEPS_SHOWN + 1])
    if not steps:
        return None
    more = len(steps) > STEPS_SHOWN
    shown = list(reversed(steps[:STEPS_SHOWN]))
    show_value = pretty_json if may_view_payload(request, queue) else masked_json
    context: dict[str, Any] = {
        "steps": [
            {
                "name": step.name,
                "recorded": when(step.recorded_at),
                "ran_for": ran_for(step.duration),
                "attempt": step.attempt,
                "value": show_value(step.value),
                "reading": reading(step.name, step.value),
                "requeue_url": requeue_url(step.name) if requeue_url else None,
            }
            for step in shown
        ],
        "more": more,
        "shown": STEPS_SHOWN,
    }
    return render_to_string("admin/django_alkqueue/steps_panel.html", context, request)


class StepsPanel(admin.ModelAdmin):  # type: ignore[type-arg]
    """Mix into the ModelAdmin of a page showing one job: its change form gets the Steps
    section (the template is WorkflowPanel's, which shows both)."""

    #: The field of this page's rows that holds the job's id.
    job_id_field = "id"

    def step_requeue_url(self, request: HttpRequest, obj: Model) -> Callable[[str], str] | None:
        """Where this page offers Requeue from step: the dead letter page, to users who may
        requeue. None elsewhere."""
        return None

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Model | None = None,
    ) -> HttpResponse:
        if obj is not None:
            using = obj._state.db or "default"
            job_id, queue = getattr(obj, self.job_id_field), getattr(obj, "queue", "")
            requeue_url = self.step_requeue_url(request, obj)
            context["alk_steps"] = steps_panel(request, using, job_id, queue, requeue_url)
        return super().render_change_form(request, context, add, change, form_url, obj)
