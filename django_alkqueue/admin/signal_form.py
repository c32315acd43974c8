"""Send signal on a live job's page (docs/admin.md, "Steps"): a job waiting for a signal
(job.wait_for) shows the signal it waits for and the wait's deadline; a user with the
signal_queuemessage permission sends it a signal through a form, its payload JSON checked
as Queue.signal checks it: a bad one shows the form again with the error and writes nothing.
The signal goes through job_actions.signal, audited as the other actions are."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import job_actions
from ..clock import system_clock
from ..conf import get_settings
from ..exceptions import InvalidOption, PayloadError
from ..models import QueueMessage, WaitingJob
from ..payload import decode, encode
from ..steps import check_name
from .audit import actor
from .permissions import has_perm
from .times import when

#: The URL name of the page, under the admin's namespace.
URL_NAME = "django_alkqueue_queuemessage_signal"
#: The permission that sends signals.
PERMISSION = "signal_queuemessage"


class SignalForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Signal"), max_length=200, strip=False)
    payload = forms.CharField(
        label=gettext_lazy("Payload (JSON)"),
        widget=forms.Textarea(attrs={"rows": 6, "cols": 60}),
        initial="null",
        strip=False,
        help_text=gettext_lazy("What job.wait_for returns: any JSON value, null by default."),
    )

    def clean_name(self) -> str:
        try:
            return check_name(self.cleaned_data["name"])
        except InvalidOption as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_payload(self) -> Any:
        text = self.cleaned_data["payload"]
        try:
            value = decode(text)
        except ValueError as exc:
            raise forms.ValidationError(_("Not JSON: %(error)s") % {"error": exc}) from None
        try:
            encode(value, max_bytes=get_settings().MAX_PAYLOAD_BYTES)
        except PayloadError as exc:
            raise forms.ValidationError(str(exc)) from None
        return value


def waited_signal(using: str, job: QueueMessage) -> WaitingJob | None:
    """The wait for a signal of a waiting job, or None (one query, for waiting jobs only)."""
    if job.claim_token is not None or job.run_at is not None:
        return None
    rows = WaitingJob.objects.using(using).filter(job_id=job.id, signal__isnull=False)
    return rows.first()


def signal_panel(request: HttpRequest, using: str, job: QueueMessage) -> SafeString | None:
    """The section saying which signal a waiting job waits for and until when, with the
    Send signal button for a user who may send one; None for a job not waiting for one."""
    wait = waited_signal(using, job)
    if wait is None:
        return None
    context = {
        "signal": wait.signal,
        "deadline": None if wait.run_at is None else when(wait.run_at),
        "send_url": signal_url(job.id) if has_perm(request, QueueMessage, PERMISSION) else None,
    }
    return render_to_string("admin/django_alkqueue/signal_panel.html", context, request)


def signal_url(job_id: int) -> str:
    return reverse(f"admin:{URL_NAME}", args=[job_id])


def send_signal_view(
    model_admin: admin.ModelAdmin[QueueMessage], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET: the form (the signal the job waits for filled in); POST: send it."""
    if not has_perm(request, QueueMessage, PERMISSION):
        raise PermissionDenied
    job = model_admin.get_object(request, object_id)
    if job is None:
        raise Http404(_("No live job with this id."))
    using = job._state.db or "default"
    wait = waited_signal(using, job)
    back = reverse("admin:django_alkqueue_queuemessage_change", args=[job.id])
    form = SignalForm(
        request.POST if request.method == "POST" else None,
        initial={"name": wait.signal if wait else ""},
    )
    if request.method == "POST" and form.is_valid():
        name, payload = form.cleaned_data["name"], form.cleaned_data["payload"]
        sent = job_actions.signal(using, job.id, name, payload, actor(request), system_clock())
        if sent:
            text = _("Sent signal %(name)s to job %(id)s.")
            model_admin.message_user(request, text % {"name": repr(name), "id": job.id})
        else:
            text = _("Not sent: job %(id)s is no longer live, or has a signal %(name)s already.")
            model_admin.message_user(
                request, text % {"name": repr(name), "id": job.id}, messages.WARNING
            )
        return HttpResponseRedirect(back)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": _("Send a signal to job %(id)s") % {"id": job.id},
        "job": job,
        "wait": wait,
        "form": form,
        "back": back,
    }
    return TemplateResponse(request, "admin/django_alkqueue/send_signal.html", context)


class SignalPanel(admin.ModelAdmin):  # type: ignore[type-arg]
    """Mix into the live jobs' ModelAdmin: a waiting job's page names the signal it waits
    for and links to Send signal."""

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Model | None = None,
    ) -> HttpResponse:
        if isinstance(obj, QueueMessage):
            context["alk_signal"] = signal_panel(request, obj._state.db or "default", obj)
        return super().render_change_form(request, context, add, change, form_url, obj)
