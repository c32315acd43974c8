"""The guard of the one construction past a constructor (jobs.without_init, issue 49): a Job
and a handler's running job made that way are the same values the frozen dataclass's own
constructor makes. If a Python release changes how dataclasses keep their fields (slots, a
generated __init__ that sets more than the fields), these fail loudly, and without_init must
go back to the constructor."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from django_alkqueue.jobs import Job, make_job, without_init
from django_alkqueue.running import Run, RunningJob, running_job

AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def fields() -> dict[str, object]:
    return {
        "id": 7, "queue": "emails", "payload": {"to": "a@example.com"}, "state": "pending",
        "priority": 0, "attempts": 1, "max_attempts": 3, "backoff_base": 2.0, "lease": 30.0,
        "run_at": AT, "enqueued_at": AT, "expires_at": None, "unique_key": None,
        "claimed_by": None, "lease_expires_at": None, "last_error": None, "died_at": None,
    }  # fmt: skip


def test_a_job_made_without_init_equals_the_constructors():
    assert make_job(fields()) == Job(**fields())  # type: ignore[arg-type]


def test_a_job_made_without_init_holds_every_field_and_nothing_else():
    job = make_job(fields())
    assert set(vars(job)) == {field.name for field in dataclasses.fields(Job)}
    assert dataclasses.asdict(job) == dataclasses.asdict(Job(**fields()))  # type: ignore[arg-type]


def test_a_job_made_without_init_is_still_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        make_job(fields()).attempts = 2  # type: ignore[misc]


def test_a_job_made_without_init_hashes_copies_replaces_and_pickles_as_the_constructors():
    made, built = make_job(fields()), Job(**fields())  # type: ignore[arg-type]
    assert repr(made) == repr(built)
    assert dataclasses.replace(made, attempts=2) == dataclasses.replace(built, attempts=2)
    assert copy.copy(made) == built
    assert pickle.loads(pickle.dumps(made)) == built


def test_the_job_dataclass_keeps_its_fields_in_an_instance_dict():
    # without_init writes __dict__: a Job with __slots__ would have none to write.
    assert "__dict__" in dir(Job(**fields()))  # type: ignore[arg-type]
    assert not hasattr(Job, "__slots__")


def test_a_running_job_shows_the_jobs_fields_and_its_own_run():
    job, run = make_job(fields()), Run()
    running = running_job(job, run)
    assert isinstance(running, RunningJob)
    assert {
        f.name: getattr(running, f.name) for f in dataclasses.fields(Job) if f.name != "progress"
    } == {f.name: getattr(job, f.name) for f in dataclasses.fields(Job) if f.name != "progress"}
    running.progress(1, 2, "half")
    assert (running.progress.done, running.progress.note) == (1, "half")
    with pytest.raises(dataclasses.FrozenInstanceError):
        running.attempts = 2  # type: ignore[misc]


def test_without_init_makes_any_frozen_dataclass_as_its_constructor_would():
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 0

    assert without_init(Point, {"x": 1, "y": 0}) == Point(1)
