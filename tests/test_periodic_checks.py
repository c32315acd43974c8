"""Periodic entries that cannot work: a cron that never fires, a task module that fails on
import. The check names the entry; alk_periodic and the scheduler carry on."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import override_settings

from django_alkqueue.periodic import PeriodicService
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

FEB_30 = {"feb-30": {"cron": "0 0 30 2 *", "queue": "health", "payload": {}}}
PING = {"ping": {"cron": "*/5 * * * *", "queue": "health", "payload": {"ping": True}}}


def periodic_errors() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E002"]


def test_a_cron_that_never_fires_fails_the_check_as_an_invalid_cron():
    with override_settings(ALKQUEUE={"PERIODIC": FEB_30}):
        errors = periodic_errors()
    assert len(errors) == 1
    assert "invalid cron" in errors[0].msg and "feb-30" in errors[0].msg


@pytest.mark.parametrize("name", ["nightly\x00", "report-\udcff"])
def test_an_entry_name_no_database_can_store_fails_the_check(name):
    """The name goes to PeriodicTick.name and into its jobs' unique keys: a NUL would fail
    every tick on PostgreSQL with a DataError, a lone surrogate on every database."""
    with override_settings(ALKQUEUE={"PERIODIC": {name: PING["ping"]}}):
        errors = periodic_errors()
    assert len(errors) == 1
    assert "has a NUL character or an unpaired surrogate" in errors[0].msg


def test_alk_periodic_shows_never_for_a_cron_that_never_fires(capsys):
    with override_settings(ALKQUEUE={"PERIODIC": {**FEB_30, **PING}}):
        call_command("alk_periodic")
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["feb-30"].rstrip().endswith("never")
    assert not lines["ping"].rstrip().endswith("never")


def test_the_scheduler_skips_a_cron_that_never_fires_and_logs_it_once(caplog):
    scheduler = PeriodicService("default", FakeClock(datetime(2030, 1, 1, 12, 7, tzinfo=UTC)))
    with (
        override_settings(ALKQUEUE={"PERIODIC": {**FEB_30, **PING}}),
        caplog.at_level(logging.INFO, logger="django_alkqueue"),
    ):
        assert scheduler.run_once() == ["ping"]
        assert scheduler.run_once() == []
    assert caplog.text.count("feb-30") == 1 and "never fires" in caplog.text


def test_a_task_module_that_fails_on_import_fails_the_check_naming_the_entry(tmp_path, monkeypatch):
    (tmp_path / "alkqueue_broken_tasks.py").write_text('raise RuntimeError("no API key")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = {"cron": "0 3 * * *", "task": "alkqueue_broken_tasks.nightly"}
    with override_settings(ALKQUEUE={"PERIODIC": {"nightly-report": entry}}):
        errors = periodic_errors()
    assert len(errors) == 1
    assert "nightly-report" in errors[0].msg
    assert "RuntimeError: no API key" in errors[0].msg


def test_a_cron_that_is_not_a_string_fails_the_check():
    with override_settings(ALKQUEUE={"PERIODIC": {"n": {**PING["ping"], "cron": 10**5000}}}):
        errors = periodic_errors()
    assert len(errors) == 1 and "invalid cron an int of about 5001 digits" in errors[0].msg
