"""The hostile probe's values of issue 48, property-based (PostgreSQL, SQLite and MariaDB),
through every value a handler or an operator passes beside scenario 8's enqueue options:
progress reports, handler outputs kept in the history, a task's arguments and return value,
error texts, flow-control limits (given, and stored on a Consumer row by hand), periodic
entries, batch callbacks, and what `alk_status` prints. The values: lone surrogates, NUL
characters, numbers past what Python prints or float() holds (10**400, 10**5000, 1e400, NaN,
infinities), "9" * 5000 + "/s", terminal escape codes.

Each call either succeeds and what it stored reads back (escaped where the docs say so), or
raises the documented exception with every row as it was (scenario 8's `judged`, in a
rolled-back savepoint). Never a DataError, a UnicodeEncodeError, a ValueError or an
OverflowError. `make test` runs a bounded number of examples; `make chaos` (CHAOS_LONG=1) many
more. The admin's query strings are scenario 11's (test_11_admin_fuzzer.py).
"""

from __future__ import annotations

import io
import json
import unicodedata
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from django_alkqueue import InvalidOption, batch, operations, queue
from django_alkqueue import limits as flow
from django_alkqueue.conf import read_settings
from django_alkqueue.consumers import consumer, registry
from django_alkqueue.error_text import capped
from django_alkqueue.models import (
    Batch,
    Consumer,
    FinishedJob,
    PeriodicTick,
    QueueMessage,
    Worker,
)
from django_alkqueue.models import TaskResult as TaskResultRecord
from django_alkqueue.payload import kept_value
from django_alkqueue.periodic import PeriodicService, entry_errors
from django_alkqueue.running import MAX_NOTE_CHARS, running_job
from django_alkqueue.tasks_compat import normalize_json
from django_alkqueue.validation import clean_error_text, storable_text
from django_alkqueue.worker.executor import error_text
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.inflight import InFlight
from testproject.shop import tasks
from tests.clocks import FakeClock

from .scale import pick
from .strategies import (
    ANY_INTS,
    HUGE_INTS,
    HUGE_NUMBERS,
    NOW,
    TERMINAL_ESCAPES,
    any_text,
    anything,
    hostile_text,
    json_scalars,
    json_values,
    mostly,
    optional_durations,
    payloads,
    property_settings,
)
from .test_08_bad_input import fresh, judged, same, stored

pytestmark = pytest.mark.django_db

PROPERTY = property_settings(pick(short=25, long=1_000))

#: Text every database stores verbatim (what a key, a worker id or a note may hold): any
#: character but NUL and the surrogates, control and format characters often.
storable = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40),
    st.text(
        st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Lo"], exclude_characters="\x00"),
        max_size=8,
    ),
    TERMINAL_ESCAPES,
)
#: The same, 1 to 255 characters: a worker id or a key.
storable_ids = storable.map(lambda text: text[:255]).filter(bool)
#: Numbers a handler reports as progress: plain ones three times in four.
amounts = mostly(
    st.one_of(st.integers(0, 10**6), st.floats(0, 1e12)),
    st.one_of(HUGE_NUMBERS, anything),
)
#: What a handler may return: JSON, anything JSON refuses, the probe's values, nested.
outputs = st.one_of(
    payloads,
    hostile_text,
    HUGE_NUMBERS,
    st.lists(st.one_of(hostile_text, HUGE_NUMBERS, json_scalars), max_size=3),
    st.dictionaries(hostile_text, json_scalars, max_size=2),
)
#: What a flow-control limit may be given as.
limit_values = st.one_of(
    anything,
    hostile_text,
    st.from_regex(r"\A[0-9]{1,7} ?/ ?[smhd]\Z"),
    st.integers(1, 7_000).map(lambda digits: "9" * digits + "/s"),
    st.tuples(
        st.one_of(ANY_INTS, HUGE_NUMBERS, st.integers(0, 200_000)),
        st.one_of(optional_durations, HUGE_NUMBERS, st.floats(0, 100_000)),
    ),
)
#: What a Consumer row's limit columns may hold when written by hand: any JSON the ORM
#: writes and the databases store (no NaN or infinity and no NUL: jsonb refuses them; no int
#: past print's limit).
stored_limits = st.one_of(
    json_values.filter(lambda value: value is not None),  # None would be SQL NULL
    st.dictionaries(
        st.sampled_from([*flow.NAMES, "nope"]),
        st.one_of(
            json_values,
            hostile_text.filter(storable_text),
            st.sampled_from([10**400, -(10**400), 2**63]),
            st.lists(
                st.one_of(st.sampled_from([10**400, 5, 0, -1]), st.floats(0, 1e300)), max_size=3
            ),
        ),
        max_size=4,
    ),
).filter(lambda value: "\\u0000" not in json.dumps(value))

QUEUE = "prop-hostile"


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def printed_safely(output: str) -> bool:
    """No character a terminal acts on but the newlines between lines."""
    return not any(
        char != "\n" and unicodedata.category(char) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        for char in output
    )


# -- progress ---------------------------------------------------------------------------------


def _held(q: Any) -> tuple[Any, Any, HeartbeatService]:
    """A claimed job, its handler's job and a heartbeat service over it, as the worker has them."""
    q.enqueue({"n": 1})
    handle = q.claim_one("w")
    inflight = InFlight()
    inflight.add(handle)
    return (
        handle,
        running_job(handle.job, inflight.run_of(handle)),
        HeartbeatService(inflight, "default"),
    )


@PROPERTY
@given(done=amounts, total=st.one_of(st.none(), amounts), note=storable)
def test_progress_is_refused_or_written_by_the_next_heartbeat(done: Any, total: Any, note: str):
    q = fresh()

    def call(held: Any) -> Any:
        _, job, heartbeats = held
        job.progress(done, total, note)
        heartbeats.run_once(NOW)  # the heartbeat writes it: it must not raise

    def verify(held: Any, _: None) -> None:
        progress = stored(q, held[0].job.id).progress
        assert progress is not None
        assert (progress.done, progress.total) == (done, total)
        assert progress.note == note[:MAX_NOTE_CHARS]

    judged("progress", call, verify, lambda: _held(q))


@pytest.mark.parametrize("note", ["file-\udcff.txt", "\ud800"])
def test_a_progress_note_no_database_can_store_is_refused_or_cleaned(note: str):
    handle, job, heartbeats = _held(fresh())
    try:
        job.progress(1, 2, note)
    except InvalidOption:
        return  # refused at the call: documented
    heartbeats.run_once(NOW)  # or written, cleaned: the heartbeat must not raise
    assert stored(fresh(), handle.job.id).progress is not None


# -- handler outputs, kept ----------------------------------------------------------------------


@PROPERTY
@given(output=outputs)
def test_a_kept_jobs_output_is_recorded_or_noted_and_the_job_is_acked(output: Any):
    q = fresh(QUEUE)

    def setup() -> Any:
        q.enqueue({"n": 1})
        return q.claim_one("w")

    def call(handle: Any) -> bool:
        handle.record(output, 0.5)
        return bool(handle.ack())

    def verify(handle: Any, acked: bool) -> None:
        assert acked and q.get_job(handle.job.id).state == "succeeded"
        row = FinishedJob.objects.get(job_id=handle.job.id)
        if row.output_error is None:
            assert as_json(row.output) == as_json(output)
        else:
            assert row.output is None and row.output_error.startswith("output not recorded: ")
            assert storable_text(row.output_error)

    with override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"keep": 3600}}}):
        judged("kept output", call, verify, setup)


# -- tasks: arguments and return values ----------------------------------------------------------


@PROPERTY
@given(args=st.lists(st.one_of(json_values, hostile_text, HUGE_INTS), max_size=3))
def test_a_tasks_arguments_are_enqueued_as_given_or_refused_with_a_payload_error(args: list[Any]):
    def verify(_: None, result: Any) -> None:
        payload = QueueMessage.objects.get(pk=int(result.id)).payload
        assert same(payload["args"], args)

    judged("task enqueue", lambda _: tasks.echo.enqueue(*args), verify)


@PROPERTY
@given(value=st.one_of(json_values, hostile_text, HUGE_NUMBERS, outputs))
def test_a_tasks_return_value_is_kept_escaped_or_fails_with_a_payload_error(value: Any):
    def call(_: None) -> Any:
        try:
            normal = normalize_json(value)
        except (TypeError, ValueError):
            return None  # Django refuses it first: the attempt fails with its TypeError
        kept = kept_value(normal, "the task's return value")
        record = TaskResultRecord.objects.create(
            job_id=1, backend="default", task_path="t", queue="default", status="SUCCESSFUL",
            enqueued_at=NOW, return_value=kept,
        )  # fmt: skip
        return kept, record.pk

    def verify(_: None, written: Any) -> None:
        if written is None:
            return
        kept, pk = written
        read = TaskResultRecord.objects.get(pk=pk).return_value
        # Numbers and the order of keys may come back rewritten (jsonb), strings and keys
        # exactly, escaped.
        written = _strings(json.loads(as_json(kept)))  # JSON's keys are strings
        assert sorted(_strings(read)) == sorted(written)
        assert all(storable_text(text) for text in written)

    judged("task return value", call, verify)


def _strings(value: Any) -> list[str]:
    """Every string and key of a JSON value, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [key, *_strings(item)]]
    return []


# -- error texts ---------------------------------------------------------------------------------


@PROPERTY
@given(message=st.one_of(any_text, hostile_text), sensitive=st.booleans())
def test_an_exceptions_message_is_kept_escaped_in_the_error_text(message: str, sensitive: bool):
    q = fresh()

    def setup() -> Any:
        q.enqueue({"n": 1})
        return q.claim_one("w")

    def call(handle: Any) -> tuple[bool, str]:
        try:
            raise ValueError(message)
        except ValueError as error:
            text = error_text(error, sensitive)
        return handle.fail(text), text

    def verify(handle: Any, result: tuple[bool, str]) -> None:
        done, text = result
        assert done
        got = stored(q, handle.job.id).last_error
        assert got == capped(clean_error_text(text) or "failed") and storable_text(got)

    judged("error text", call, verify, setup)


# -- flow-control limits ---------------------------------------------------------------------


@PROPERTY
@given(name=st.sampled_from(flow.NAMES), value=limit_values)
def test_a_limit_is_taken_alike_or_refused_by_the_decorator_set_limits_and_the_settings(
    name: str, value: Any
):
    try:
        parsed = flow.parse(name, value)
    except InvalidOption:
        parsed = InvalidOption
    try:
        consumer(QUEUE, **{name: value})(lambda payload, job: None)
    except InvalidOption:
        assert parsed is InvalidOption
    else:
        assert getattr(registry.get(QUEUE).limits, name) == parsed
    finally:
        registry.unregister(QUEUE)
    try:
        read = read_settings({"QUEUES": {QUEUE: {name: value}}})
    except ImproperlyConfigured:
        assert parsed is InvalidOption
    else:
        assert read.QUEUES[QUEUE][name] == value and parsed is not InvalidOption

    def setup() -> None:
        Consumer.objects.create(queue=QUEUE, handler="app.f", lease=30, max_attempts=3)

    def verify(_: None, in_force: Any) -> None:
        assert parsed is not InvalidOption and getattr(in_force.limits, name) == parsed

    judged("set_limits", lambda _: operations.set_limits(QUEUE, **{name: value}), verify, setup)


@PROPERTY
@given(code=stored_limits, overrides=stored_limits)
def test_whatever_a_consumer_row_holds_the_limits_are_read_and_alk_status_prints(
    code: Any, overrides: Any
):
    with transaction.atomic():
        Consumer.objects.create(queue=QUEUE, handler="app.f", lease=30, max_attempts=3,
                                code_limits=code, limit_overrides=overrides)  # fmt: skip
        in_force = flow.limits_in_force(QUEUE)
        assert all(isinstance(item.stored, str) for item in in_force.ignored)
        out = io.StringIO()
        call_command("alk_status", stdout=out)
        assert QUEUE in out.getvalue()
        transaction.set_rollback(True)


# -- periodic entries ----------------------------------------------------------------------------


@PROPERTY
@given(name=any_text.filter(bool), payload=st.one_of(payloads, hostile_text))
def test_a_periodic_entry_fails_the_check_or_its_tick_is_enqueued_or_logged(
    name: str, payload: Any
):
    entry = {"cron": "* * * * *", "queue": QUEUE, "payload": payload}
    errors = entry_errors(name, entry)  # the system check: a list, never an exception
    if errors:
        return

    def call(_: None) -> list[str]:
        with override_settings(ALKQUEUE={"PERIODIC": {name: entry}}):
            return PeriodicService("default", FakeClock(NOW)).run_once(NOW)

    def verify(_: None, enqueued: list[str]) -> None:
        jobs = list(QueueMessage.objects.filter(queue=QUEUE))
        if enqueued:  # the tick and its job, written together
            assert enqueued == [name] and len(jobs) == 1 and same(jobs[0].payload, payload)
            assert PeriodicTick.objects.filter(name=name).exists()
        else:  # refused at the tick (a payload that is no JSON): logged, nothing written
            assert jobs == [] and not PeriodicTick.objects.exists()

    judged("periodic tick", call, verify)


# -- batch callbacks -------------------------------------------------------------------------


@PROPERTY
@given(
    payload=st.dictionaries(any_text, st.one_of(json_scalars, hostile_text), max_size=3),
    name=st.one_of(any_text, anything),
)
def test_a_batch_opens_with_its_callback_or_is_refused(payload: dict[str, Any], name: Any):
    def call(_: None) -> Any:
        with batch(on_finish=queue("prop-callback").job(payload), name=name) as opened:
            return opened

    def verify(_: None, opened: Any) -> None:
        row = Batch.objects.get(pk=opened.pk)
        assert row.name == name and row.fired_at is not None  # empty: it fires at the end
        (callback,) = QueueMessage.objects.filter(queue="prop-callback")
        assert callback.payload["_alkqueue"] == {"batch": row.pk}

    judged("batch", call, verify)


# -- what alk_status prints ------------------------------------------------------------------


@PROPERTY
@given(
    worker=storable_ids,
    host=storable.map(lambda text: text[:255]),
    key=storable_ids,
    note=storable,
)
def test_alk_status_prints_every_stored_string_escaped_and_json_keeps_it(
    worker: str, host: str, key: str, note: str
):
    with transaction.atomic():
        now = timezone.now()
        Worker.objects.create(worker_id=worker, hostname=host, pid=1, queues=[QUEUE, key],
                              concurrency=1, started_at=now, last_heartbeat_at=now)  # fmt: skip
        Consumer.objects.create(queue=QUEUE, handler="app.f", lease=30, max_attempts=3,
                                code_limits={"key_concurrency": 1})  # fmt: skip
        job = queue(QUEUE).enqueue({}, concurrency_key=key)
        queue(QUEUE).claim(worker, 1)
        progress = json.dumps({"done": 1, "total": 2, "note": note})
        QueueMessage.objects.filter(id=job.id).update(progress=progress, progress_at=now)
        text, as_json_text = io.StringIO(), io.StringIO()
        call_command("alk_status", stdout=text)
        call_command("alk_status", "--json", stdout=as_json_text)
        transaction.set_rollback(True)
    assert printed_safely(text.getvalue())
    data = json.loads(as_json_text.getvalue())
    assert [(w["worker_id"], w["hostname"]) for w in data["workers"]] == [(worker, host)]
    assert [r["progress"]["note"] for r in data["running"]] == [note]
