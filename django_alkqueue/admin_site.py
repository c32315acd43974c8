"""The Queue overview first in the app's section of the admin (index, app page and sidebar).

Django's admin lists an app's models alphabetically, so "Queue overview" would come after
"Consumers", "Dead letters" and "Jobs". Django orders them in `AdminSite.get_app_list`,
which a site overrides (docs/admin.md, "The overview first"): replace
"django.contrib.admin" in INSTALLED_APPS by "django_alkqueue.admin_site.AdminConfig", or mix
`OverviewFirst` into a project's own AdminSite. Kept out of the admin package: an AdminConfig
is imported before the models can be.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig
from django.core import checks
from django.http import HttpRequest

from .check_hints import error

#: The model whose admin entry opens the overview (admin.overview.QueueStatAdmin).
OVERVIEW_MODEL = "QueueStat"


def overview_first(app_list: list[Any]) -> list[Any]:
    """`app_list` with the Queue overview moved to the top of this app's models, the rest in
    the order they had."""
    for app in app_list:
        if app["app_label"] == "django_alkqueue":
            app["models"].sort(key=lambda model: model["object_name"] != OVERVIEW_MODEL)
    return app_list


class OverviewFirst:
    """Mix into an AdminSite: the Queue overview first among the app's entries."""

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        return overview_first(super().get_app_list(request, app_label))  # type: ignore[misc]


class AdminSite(OverviewFirst, admin.AdminSite):
    """Django's admin site with the Queue overview first."""


def check_app_installed(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E103: our AdminConfig is in INSTALLED_APPS, "django_alkqueue" is not.
    Registered by AdminConfig.ready() below, the one code of ours that runs then;
    the models carry their app_label so that importing them (a view's `queue`, the URLconf
    the checks load) does not fail before this check reports."""
    if apps.is_installed("django_alkqueue"):
        return []
    message = (
        'django_alkqueue.admin_site.AdminConfig is in INSTALLED_APPS, but "django_alkqueue" '
        "is not: the queue's models, tables, commands and admin pages are missing."
    )
    return [error(message, "alkqueue.E103")]


class AdminConfig(DjangoAdminConfig):
    """django.contrib.admin with `AdminSite` above as its default site."""

    default_site = "django_alkqueue.admin_site.AdminSite"

    def ready(self) -> None:
        super().ready()
        if not apps.is_installed("django_alkqueue"):
            # Without the app, none of its code runs at start-up but this: its system check
            # says what to do (alkqueue.E103).
            checks.register(check_app_installed, "alkqueue")
