"""Progress (docs/running-jobs.md): job.progress(done, total, note) is kept in memory and
written with the next heartbeat, at most once a second per job; get_job reads it back as
Job.progress, the admin shows a bar for claimed jobs and alk_status lists running jobs."""

from __future__ import annotations

import json

import pytest

from django_alkqueue import InvalidOption, queue
from django_alkqueue.running import running_job
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.inflight import InFlight
from tests.admin_helpers import JOBS
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, run_manage, start_worker, stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("running_consumers"),
]

CONSUMERS = RUNNING_CONSUMERS


@pytest.fixture
def held(q):
    """A claimed job held by an InFlight, its handler's job, and a heartbeat service over both."""
    q.enqueue({"n": 1})
    (handle,) = q.claim("w1")
    inflight = InFlight()
    inflight.add(handle)
    job = running_job(handle.job, inflight.run_of(handle))
    return handle, job, HeartbeatService(inflight, q.using)


def test_the_handlers_job_reads_the_claimed_fields_and_leaves_the_claimed_job_as_it_was(held):
    handle, job, _ = held
    before = dict(vars(handle.job))
    job.progress(1, 2)
    assert (job.id, job.payload, job.state, job.attempts) == (
        handle.job.id, {"n": 1}, "claimed", handle.job.attempts,
    )  # fmt: skip
    assert vars(handle.job) == before  # no progress, no Run written into the claimed Job
    assert job.progress.done == 1 and not job.cancelled


def test_progress_is_written_by_the_next_heartbeat_and_read_back_by_get_job(q, held, clock):
    handle, job, heartbeats = held
    job.progress(3, 10, "three of ten")
    assert q.get_job(handle.job.id).progress is None  # nothing written by the call itself

    heartbeats.run_once(clock())

    progress = q.get_job(handle.job.id).progress
    assert (progress.done, progress.total, progress.note) == (3, 10, "three of ten")
    assert progress.updated_at is not None


def test_a_second_report_within_a_second_waits_for_a_later_heartbeat(q, held, clock):
    handle, job, heartbeats = held
    job.progress(1, 10)
    heartbeats.run_once(clock())
    job.progress(2, 10)

    heartbeats.run_once(clock())  # at once: the last write is less than a second old

    assert q.get_job(handle.job.id).progress.done == 1


def test_the_first_report_wakes_the_heartbeat_service(held):
    _, job, heartbeats = held

    job.progress(1)

    assert heartbeats.inflight.reported.is_set()


def test_a_handler_reads_its_last_report_back(held):
    _, job, _ = held

    job.progress(4, None, "four")

    assert (job.progress.done, job.progress.total, job.progress.note) == (4, None, "four")


@pytest.mark.parametrize(
    ("done", "total", "note"),
    [(-1, None, ""), (float("nan"), None, ""), ("3", None, ""), (True, None, ""), (1, -2, ""),
     (1, None, 7), (float("inf"), None, ""),
     pytest.param(10**400, None, "", id="done-10**400"),
     pytest.param(1, 10**5000, "", id="total-10**5000"),
     pytest.param(-(10**5000), None, "", id="done--10**5000")],
)  # fmt: skip
def test_a_bad_progress_raises_invalid_option(held, done, total, note):
    _, job, _ = held
    with pytest.raises(InvalidOption):
        job.progress(done, total, note)


@pytest.mark.parametrize("note", ["file-\udcff.txt", "\ud800"])
def test_a_note_with_an_unpaired_surrogate_is_refused_at_the_call(held, note):
    _, job, _ = held
    with pytest.raises(InvalidOption, match="unpaired surrogate"):
        job.progress(1, 2, note)
    assert job.progress.done is None  # nothing kept for the heartbeat


def test_a_note_with_a_nul_is_written_and_read_back(q, held, clock):
    handle, job, heartbeats = held
    job.progress(1, 2, "a\x00b")
    heartbeats.run_once(clock())
    assert q.get_job(handle.job.id).progress.note == "a\x00b"


def test_a_report_the_heartbeat_cannot_write_is_dropped_and_the_lease_extended(q, held, clock):
    """No value may stop the heartbeat service: a report that reached the Run unchecked (as one
    crossing from a process-pool child could) is logged and dropped, the leases extended."""
    handle, job, heartbeats = held
    job._run.report(1, None, "\ud800", clock())
    before = handle.lease_expires_at
    clock.advance(5)

    extended = heartbeats.run_once(clock())

    assert extended == {handle.claim}
    assert handle.lease_expires_at > before
    assert q.get_job(handle.job.id).progress is None
    assert job._run.progress_due(float("inf")) is None  # dropped: not tried again


def test_a_pending_job_has_no_progress(q):
    job = q.enqueue({})

    assert q.get_job(job.id).progress is None


def test_progress_reported_in_a_worker_is_read_back_and_shown_by_alk_status():
    job = queue("reporting").enqueue({"steps": 4})
    worker = Watched(start_worker("--queue", "reporting", "--shutdown-timeout", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: _done(job.id) == 4, timeout=30,
                   what=f"the last progress written\n{worker.output}")  # fmt: skip
        progress = queue("reporting").get_job(job.id).progress
        assert (progress.total, progress.note) == (4, "step 4")

        status = run_manage("alk_status", "--json")
        running = json.loads(status.stdout)["running"]
        assert [(r["job_id"], r["progress"]["done"]) for r in running] == [(job.id, 4)]
        text = run_manage("alk_status").stdout
        assert "4/4 (100%)" in text and "step 4" in text
    finally:
        queue("reporting").cancel(job.id)
        stop(worker.process)


def _done(job_id: int) -> float | None:
    found = queue("reporting").get_job(job_id)
    return None if found is None or found.progress is None else found.progress.done


def test_the_job_list_shows_a_progress_bar_for_a_claimed_job(q, held, clock, root):
    _, job, heartbeats = held
    job.progress(3, 10, "three of ten")
    heartbeats.run_once(clock())

    page = root.get(JOBS).content.decode()

    assert '<progress value="0.300" max="1">' in page and "three of ten" in page


def test_the_job_page_shows_a_progress_bar_for_a_claimed_job(q, held, clock, root):
    handle, job, heartbeats = held
    job.progress(3, 10, "three of ten")
    heartbeats.run_once(clock())

    page = root.get(f"{JOBS}{handle.job.id}/change/").content.decode()

    assert '<progress value="0.300" max="1">' in page and "three of ten" in page


def test_the_job_list_and_page_show_cancel_requested_until_the_handler_stops(q, root):
    from django_alkqueue import operations

    job = q.enqueue({})
    q.claim("w1")
    q.cancel(job.id)

    assert "cancel requested" in root.get(JOBS).content.decode()
    page = root.get(f"{JOBS}{job.id}/change/")
    assert page.status_code == 200 and "cancel requested" in page.content.decode()

    operations.clear_cancel_requests(q.using, [job.id])  # the handler stopped

    assert "cancel requested" not in root.get(JOBS).content.decode()
    assert root.get(f"{JOBS}{job.id}/change/").status_code == 302
