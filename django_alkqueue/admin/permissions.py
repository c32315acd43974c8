"""Who may do what on the queue pages: the permission check, the view_* permission that alone
opens a page, and the 403 for a POST that names an action the user may not run."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import HttpRequest

from .compat import FORM_ACTION, detail_page_actions


def has_perm(request: HttpRequest, model: type[Model], codename: str) -> bool:
    return request.user.has_perm(f"{model._meta.app_label}.{codename}")


def may_view(request: HttpRequest, model: type[Model]) -> bool:
    """The model's view_* permission, and only it: Django's admin takes change_* as view_*
    too, but no row is edited on these pages, so change_* grants nothing (docs/security.md)."""
    return has_perm(request, model, f"view_{model._meta.model_name}")


def refuse_forbidden_action(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> None:
    """A POST naming an action of this page that the user may not run is a 403, not Django's
    quiet "No action selected": this admin's own actions and the site-wide ones (Django's
    `delete_selected`) alike. A name no page offers is left to Django's message."""
    if request.method != "POST":
        return
    asked = set(request.POST.getlist("action")) | set(request.POST.getlist(FORM_ACTION))
    allowed = set(model_admin.get_actions(request)) | set(detail_page_actions(model_admin, request))
    if (asked & action_names(model_admin)) - allowed:
        raise PermissionDenied


def action_names(model_admin: admin.ModelAdmin[Any]) -> set[str]:
    """Every action this page could offer someone, before any permission is checked."""
    if model_admin.actions is None:  # Django's way of switching actions off on a page
        return set()
    own = {a if isinstance(a, str) else a.__name__ for a in model_admin.actions}
    return own | {name for name, _ in model_admin.admin_site.actions}
