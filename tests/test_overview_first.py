"""The Queue overview first for a new user (issue 37, "First hour"): the quick start and the
README install the admin whose site lists it first, and the demo project uses it, so a
project set up from either sees the overview at the top of the app's section and sidebar."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig
from django.test import Client
from django.utils.module_loading import import_string

from django_alkqueue.admin_site import OverviewFirst
from tests.admin_helpers import CONSUMERS, make_user

ROOT = Path(__file__).resolve().parent.parent
#: The admin entry of INSTALLED_APPS that lists the overview first (docs/admin.md).
OURS = "django_alkqueue.admin_site.AdminConfig"


def installed_apps_of(doc: Path) -> list[str]:
    """The INSTALLED_APPS of the first Python block of `doc` that sets it."""
    for block in re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.DOTALL):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "INSTALLED_APPS":
                return list(ast.literal_eval(node.value))
    raise AssertionError(f"{doc} shows no INSTALLED_APPS")


@pytest.mark.parametrize("doc", ["docs/quickstart.md", "README.md"])
def test_the_install_snippet_uses_the_admin_that_lists_the_overview_first(doc):
    apps = installed_apps_of(ROOT / doc)

    assert OURS in apps and "django_alkqueue" in apps
    assert "django.contrib.admin" not in apps  # one admin app, not two
    config = import_string(OURS)
    assert issubclass(config, DjangoAdminConfig)
    assert issubclass(import_string(config.default_site), OverviewFirst)


def test_the_demo_projects_admin_site_lists_the_overview_first():
    from django.conf import settings

    assert OURS in settings.INSTALLED_APPS
    assert isinstance(admin.site, OverviewFirst)


@pytest.mark.django_db
def test_the_demo_projects_sidebar_shows_the_queue_overview_first():
    client = Client()
    client.force_login(make_user("root", superuser=True))

    apps = client.get(CONSUMERS).context["available_apps"]

    ours = next(app for app in apps if app["app_label"] == "django_alkqueue")
    assert str(ours["models"][0]["name"]) == "Queue overview"
