"""The old paths of the reports (docs/architecture.md, "reports/"): each still imports, warns
once with a DeprecationWarning that names its new path, and gives the new module's objects."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest
from django.test import Client, override_settings
from django.urls import include, path

import django_alkqueue
from django_alkqueue.reports import health, queue_stats, status, worker_report
from django_alkqueue.reports.metrics import hour_sums, views

ROOT = Path(__file__).resolve().parent.parent

REPORTS = "django_alkqueue.reports"
#: Each old path: how its warning names the new path, and the modules it re-exports.
MOVED = {
    "django_alkqueue.status": (
        f"{REPORTS} (status, queue_stats, frequent_errors)",
        (f"{REPORTS}.status", f"{REPORTS}.queue_stats", f"{REPORTS}.frequent_errors"),
    ),
    **{
        old: (new, (new,))
        for old, new in {
            "django_alkqueue.flow_status": f"{REPORTS}.flow_status",
            "django_alkqueue.health": f"{REPORTS}.health",
            "django_alkqueue.metrics.urls": f"{REPORTS}.metrics.urls",
            "django_alkqueue.metrics.views": f"{REPORTS}.metrics.views",
            "django_alkqueue.metrics.hour_sums": f"{REPORTS}.metrics.hour_sums",
            "django_alkqueue.worker.report": f"{REPORTS}.worker_report",
            "django_alkqueue.admin.health": f"{REPORTS}.database_health",
        }.items()
    },
}
TOKEN = "s3cret-token-of-the-scraper"


def first_import(old: str, monkeypatch: pytest.MonkeyPatch) -> list[warnings.WarningMessage]:
    """The warnings of importing `old` as if for the first time (put back as it was after the
    test)."""
    parent, _, leaf = old.rpartition(".")
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(importlib.import_module(parent), leaf, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(old)
    return caught


def alias(old: str) -> ModuleType:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(old)


@pytest.mark.parametrize("old", MOVED)
def test_an_old_path_warns_once_naming_its_new_path(old, monkeypatch):
    caught = first_import(old, monkeypatch)
    assert [(w.category, str(w.message)) for w in caught] == [
        (DeprecationWarning, f"{old} is deprecated; use {MOVED[old][0]}")
    ]
    # It names the import of the old path (here pytest's import hook), not the alias.
    assert not caught[0].filename.startswith(str(Path(django_alkqueue.__file__).parent))
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        importlib.import_module(old)
    assert again == []


@pytest.mark.parametrize("old", MOVED)
def test_an_old_path_gives_the_new_modules_public_objects(old):
    old_module = alias(old)
    for new in map(importlib.import_module, MOVED[old][1]):
        public = [name for name in vars(new) if not name.startswith("_")]
        assert public
        assert [
            name for name in public if getattr(old_module, name) is not getattr(new, name)
        ] == []


def test_the_documented_names_read_through_the_old_paths_are_the_new_ones():
    assert alias("django_alkqueue.status").READINGS_WITHIN is queue_stats.READINGS_WITHIN
    assert alias("django_alkqueue.status").WorkerRow is status.WorkerRow
    assert alias("django_alkqueue.status").RunningRow is status.RunningRow
    assert alias("django_alkqueue.health").HEALTHY is health.HEALTHY
    assert alias("django_alkqueue.metrics.views").PERMISSION == views.PERMISSION
    assert alias("django_alkqueue.metrics.hour_sums").SETTLED is hour_sums.SETTLED
    assert alias("django_alkqueue.worker.report").JobFieldDefaults is worker_report.JobFieldDefaults


@pytest.mark.django_db
@override_settings(ALKQUEUE={"METRICS_TOKEN": TOKEN})
def test_a_urlconf_that_includes_the_old_metrics_urls_still_serves_the_scrape():
    alias("django_alkqueue.metrics.urls")
    urlconf = ModuleType("a_project_urls")
    urlconf.urlpatterns = [path("old/", include("django_alkqueue.metrics.urls"))]
    with override_settings(ROOT_URLCONF=urlconf):
        response = Client().get("/old/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert b"alkqueue_workers" in response.content


def test_the_warning_names_the_users_import_line(tmp_path):
    # In a process of its own: under pytest the library is imported through pytest's hook.
    script = tmp_path / "uses_old_path.py"
    script.write_text(
        "import warnings\n"
        "import django\n"
        "django.setup()\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import django_alkqueue.health\n"
        "print([(w.filename, w.lineno) for w in caught if w.category is DeprecationWarning])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "testproject.settings"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == repr([(str(script), 6)])
