"""Requeue from step… on a dead letter's page: the operator picks one of the job's recorded
steps; the dead letter is requeued as the Requeue action does, and that step and every step
recorded after it are deleted in the same transaction, so that the job runs again from that
step on (job_actions.requeue_from_step, audited as the other requeues). GET shows the
choice and what goes; POST runs it. Both take the requeue permission: without it, a 403."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import job_actions
from ..clock import system_clock
from ..exceptions import InvalidOption
from ..models import DeadLetter, JobStep, QueueMessage
from .audit import actor
from .links import changelist_url
from .permissions import has_perm

#: The URL name of the page, under the admin's namespace.
URL_NAME = "django_alkqueue_deadletter_requeue_from_step"


def step_requeue_url(dead_letter_id: int, step: str) -> str:
    url = reverse(f"admin:{URL_NAME}", args=[dead_letter_id])
    return f"{url}?{urlencode({'step': step})}"


class StepChoiceForm(forms.Form):
    step = forms.ChoiceField(label=gettext_lazy("Requeue from step"))

    def __init__(self, names: list[str], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["step"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(name, name) for name in names]


def requeue_from_step_view(
    model_admin: admin.ModelAdmin[DeadLetter], request: HttpRequest, object_id: str
) -> HttpResponse:
    if not has_perm(request, DeadLetter, "requeue_deadletter"):
        raise PermissionDenied
    dead = model_admin.get_object(request, object_id)
    if dead is None:
        raise Http404(_("No dead letter with this id."))
    using = dead._state.db or "default"
    steps = JobStep.objects.using(using).filter(job_id=dead.job_id)
    names = list(steps.order_by("recorded_at", "id").values_list("name", flat=True))
    data = request.POST if request.method == "POST" else None
    form = StepChoiceForm(names, data, initial={"step": request.GET.get("step")})
    if data is not None and form.is_valid():
        return _requeue(model_admin, request, dead, form.cleaned_data["step"])
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": _("Requeue job %(job)s from a step") % {"job": dead.job_id},
        "dead": dead,
        "form": form,
        "names": names,
        "back": reverse("admin:django_alkqueue_deadletter_change", args=[dead.pk]),
    }
    return TemplateResponse(request, "admin/django_alkqueue/requeue_from_step.html", context)


def _requeue(
    model_admin: admin.ModelAdmin[DeadLetter], request: HttpRequest, dead: DeadLetter, step: str
) -> HttpResponse:
    using = dead._state.db or "default"
    try:
        done = job_actions.requeue_from_step(
            using, dead.job_id, step, actor(request), system_clock()
        )
    except InvalidOption:  # the step went since the page was drawn (the dead letter too)
        done = None
    if done is not None and done.requeued:
        n = len(done.dropped)
        text = ngettext(
            'Requeued job {job} from step "{step}": {n} step deleted.',
            'Requeued job {job} from step "{step}": {n} steps deleted.',
            n,
        )
        model_admin.message_user(
            request,
            format_html(text, job=dead.job_id, step=step, n=n),
            messages.SUCCESS,
        )
        if has_perm(request, QueueMessage, "view_queuemessage"):
            return HttpResponseRedirect(
                reverse("admin:django_alkqueue_queuemessage_change", args=[dead.job_id])
            )
    elif done is not None and done.job is not None:
        text = _("Not requeued: a live job holds the same unique key (job %(job)s).")
        model_admin.message_user(request, text % {"job": done.job.id}, messages.WARNING)
    else:
        text = _("Not requeued: the dead letter or its step is gone (requeued or deleted).")
        model_admin.message_user(request, text, messages.WARNING)
    return HttpResponseRedirect(changelist_url(DeadLetter))
