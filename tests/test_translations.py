"""The German catalogue: complete for every string the code and templates mark (a fresh
`makemessages` over a copy of the package), its .mo what the .po says; the admin and the
commands speak German when the language is German; logs and --json stay English."""

from __future__ import annotations

import gettext
import io
import json
import logging
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import translation

from django_alkqueue import queue
from django_alkqueue.models import DeadLetter
from django_alkqueue.reports.worker_report import StatusReportService
from django_alkqueue.reports.worker_stats import WorkerStats
from tests.admin_helpers import DEAD, JOBS, OVERVIEW, add_worker, client_for, make_user, queue_url

PACKAGE = Path(__file__).resolve().parent.parent / "django_alkqueue"
CATALOGUE = PACKAGE / "locale" / "de" / "LC_MESSAGES"

needs_gettext = pytest.mark.skipif(
    shutil.which("msgfmt") is None, reason="GNU gettext (make venv installs Debian's gettext)"
)


def entries(po: Path) -> list[tuple[str, str]]:
    """(flags, msgid with its context) of each entry but the header, as msgattrib reads them."""
    text = subprocess.run(
        ["msgattrib", "--no-wrap", "--no-obsolete", str(po)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = []
    for block in text.split("\n\n"):
        flags = " ".join(line for line in block.splitlines() if line.startswith("#,"))
        ids = [line for line in block.splitlines() if line.startswith(("msgctxt", "msgid "))]
        if ids and ids != ['msgid ""']:
            found.append((flags, " ".join(ids)))
    return found


def untranslated(po: Path) -> list[str]:
    text = subprocess.run(
        ["msgattrib", "--no-wrap", "--untranslated", "--no-obsolete", str(po)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return [line for line in text.splitlines() if line.startswith("msgid ") and line != 'msgid ""']


@pytest.fixture
def fresh_catalogue(tmp_path, monkeypatch) -> Path:
    """The committed German .po merged with what makemessages extracts from the package now."""
    copy = tmp_path / "django_alkqueue"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    monkeypatch.chdir(copy)
    call_command("makemessages", locale=["de"], add_location="file", no_obsolete=True,
                 verbosity=0)  # fmt: skip
    return copy / "locale" / "de" / "LC_MESSAGES" / "django.po"


@needs_gettext
def test_every_marked_string_has_a_german_translation_neither_missing_nor_fuzzy(
    fresh_catalogue,
):
    fuzzy = [msgid for flags, msgid in entries(fresh_catalogue) if "fuzzy" in flags]
    missing = untranslated(fresh_catalogue)

    assert not missing, f"no German for {missing} (make makemessages, then translate)"
    assert not fuzzy, f"fuzzy German for {fuzzy} (review, then drop the fuzzy flag)"


@needs_gettext
def test_the_committed_catalogue_is_the_one_makemessages_makes(fresh_catalogue):
    committed = {msgid for _flags, msgid in entries(CATALOGUE / "django.po")}
    fresh = {msgid for _flags, msgid in entries(fresh_catalogue)}

    assert committed == fresh, (
        f"stale: {sorted(committed - fresh)}; new: {sorted(fresh - committed)} "
        "(run make makemessages)"
    )


@needs_gettext
def test_the_committed_mo_holds_what_the_po_says(tmp_path):
    compiled = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "--check", "-o", str(compiled), str(CATALOGUE / "django.po")],
                   check=True)  # fmt: skip

    with open(compiled, "rb") as fresh, open(CATALOGUE / "django.mo", "rb") as committed:
        fresh_catalog = gettext.GNUTranslations(fresh)._catalog  # type: ignore[attr-defined]
        committed_catalog = gettext.GNUTranslations(committed)._catalog  # type: ignore[attr-defined]

    assert committed_catalog == fresh_catalog, "django.mo is stale: run make venv"


# -- the admin in German (the test client; the browser test is tests/test_admin_browser.py) --


@pytest.mark.django_db
def test_the_overview_speaks_the_browsers_german(seeded):
    add_worker("host:1")
    client = client_for(make_user("root", superuser=True), HTTP_ACCEPT_LANGUAGE="de")

    page = client.get(OVERVIEW).content.decode()

    assert '<html lang="de"' in page
    german = ("Warteschlangen-Übersicht", "Wartend", "Ältester wartender",
              "Letzte 24 h: Jobs nach Tiefe", "vor 24 h", "1 aktiv, 0 veraltet")  # fmt: skip
    assert [text for text in german if text not in page] == []
    assert "Oldest pending" not in page


@pytest.mark.django_db
def test_the_same_overview_without_a_language_stays_english(seeded):
    page = client_for(make_user("root", superuser=True)).get(OVERVIEW).content.decode()

    assert "Oldest pending" in page and "Wartend" not in page


@pytest.mark.django_db
def test_a_requeue_says_so_in_german_with_the_singular_form(seeded):
    client: Client = client_for(make_user("root", superuser=True), HTTP_ACCEPT_LANGUAGE="de")
    dead = seeded.dead[0]
    pk = DeadLetter.objects.get(job_id=dead).pk
    response = client.post(DEAD, {"action": "requeue", "_selected_action": [pk]}, follow=True)

    text = response.content.decode()
    assert re.search(r"1 Dead Letter als <a href=\"[^\"]+\">Job \d+</a> erneut eingereiht\.", text)


@pytest.mark.django_db
def test_the_job_list_shows_german_states_and_filters(seeded):
    client = client_for(make_user("root", superuser=True), HTTP_ACCEPT_LANGUAGE="de")

    page = client.get(f"{JOBS}?queue=shop-emails").content.decode()

    assert "Nach Zustand" in page  # Django's "By %(filter_title)s", our "state"
    assert '<span class="alk-state alk-pending">wartend</span>' in page
    assert "Ausgewählte Jobs abbrechen" in page or "Job abbrechen" in page
    assert client.get(queue_url("shop-emails")).content.decode().count("Letzte 24 Stunden") == 1


# -- the commands ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_alk_status_prints_its_tables_in_german_under_a_german_language():
    queue("shop-emails").enqueue({})
    out = io.StringIO()

    with translation.override("de"):
        call_command("alk_status", stdout=out)

    text = out.getvalue()
    header = text.splitlines()[0].split()
    assert header[:7] == [
        "Warteschlange",
        "wartend",
        "geplant",
        "schlafend",
        "blockiert",
        "übernommen",
        "tot",
    ]
    assert "kein Worker ist registriert" in text


@pytest.mark.django_db
def test_alk_status_json_keeps_its_english_keys_under_a_german_language():
    queue("shop-emails").enqueue({})
    out = io.StringIO()

    with translation.override("de"):
        call_command("alk_status", "--json", stdout=out)

    (row,) = [q for q in json.loads(out.getvalue())["queues"] if q["queue"] == "shop-emails"]
    assert row["pending"] == 1


@pytest.mark.django_db
def test_alk_health_says_its_problem_in_german_and_its_json_in_english():
    text, as_json = io.StringIO(), io.StringIO()

    with translation.override("de"), pytest.raises(SystemExit):
        call_command("alk_health", stdout=text)
    with translation.override("de"), pytest.raises(SystemExit):
        call_command("alk_health", "--json", stdout=as_json)

    assert text.getvalue().startswith("kein aktiver Leader: kein Worker führt")
    (problem,) = json.loads(as_json.getvalue())["problems"]
    assert problem["message"].startswith("no live leader: no worker is running")


def test_the_logged_summary_stays_english_under_a_german_language(caplog):
    reporter = StatusReportService(WorkerStats(), lambda: 0, lambda: 0, io.StringIO())

    with translation.override("de"), caplog.at_level(logging.INFO, "django_alkqueue"):
        line = reporter.run_once(now=None)  # type: ignore[arg-type]

    assert line.startswith("processed 0, failed 0, dead 0")
    assert caplog.records[-1].getMessage() == line
