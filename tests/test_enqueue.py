"""Enqueue: stamps, resolution rules, payload rules, unique keys, transactions."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings

from django_alkqueue import InvalidOption, PayloadError, enqueue, queue, signals
from django_alkqueue import payload as payload_codec
from django_alkqueue.jobs import Job
from django_alkqueue.models import QueueMessage
from tests.clocks import FakeClock
from tests.conftest import run_threads

pytestmark = pytest.mark.django_db


def test_enqueue_claim_ack_lifecycle(q, clock):
    job = q.enqueue({"to": "a@example.com"})
    assert job.state == "pending"
    assert job.attempts == 0
    [handle] = q.claim("worker-1")
    assert handle.job.id == job.id
    assert handle.job.state == "claimed"
    assert handle.job.payload == {"to": "a@example.com"}
    assert q.get_job(job.id).state == "claimed"
    assert handle.ack() is True
    assert q.get_job(job.id) is None
    assert q.depth() == 0


def test_enqueue_stamps_queue_options(make_queue, clock):
    q = make_queue("shop-reports", max_attempts=3, backoff_base=2, lease=timedelta(minutes=2),
                   priority=7)  # fmt: skip
    job = q.get_job(q.enqueue([1, 2]).id)
    assert (job.max_attempts, job.backoff_base, job.lease, job.priority) == (3, 2.0, 120.0, 7)
    assert job.run_at == clock.now
    assert job.enqueued_at == clock.now
    assert job.expires_at is None


def test_delay_wins_over_run_at(q, clock):
    job = q.enqueue(1, delay=10, run_at=clock.now + timedelta(hours=5))
    assert q.get_job(job.id).run_at == clock.now + timedelta(seconds=10)
    assert job.state == "scheduled"


def test_run_at_is_used_when_no_delay(q, clock):
    later = clock.now + timedelta(hours=1)
    assert q.get_job(q.enqueue(1, run_at=later).id).run_at == later


def test_delay_accepts_timedelta_and_float_seconds(q, clock):
    a = q.enqueue(1, delay=timedelta(seconds=1.5))
    b = q.enqueue(2, delay=1.5)
    assert q.get_job(a.id).run_at == q.get_job(b.id).run_at == clock.now + timedelta(seconds=1.5)


def test_expires_is_relative_to_enqueue_time(q, clock):
    job = q.enqueue(1, expires=timedelta(minutes=5))
    assert q.get_job(job.id).expires_at == clock.now + timedelta(minutes=5)


def test_queue_expires_option_is_stamped(make_queue, clock):
    q = make_queue("short", expires=60)
    assert q.get_job(q.enqueue(1).id).expires_at == clock.now + timedelta(seconds=60)


def test_per_call_max_attempts_and_priority_override_the_queue(make_queue):
    q = make_queue("x", max_attempts=3, priority=1)
    job = q.get_job(q.enqueue(1, max_attempts=9, priority=-4).id)
    assert (job.max_attempts, job.priority) == (9, -4)


def test_enqueue_reads_the_clock_once(q, clock):
    before = clock.reads
    q.enqueue(1, delay=5, expires=60)
    assert clock.reads == before + 1


def test_enqueue_many_reads_the_clock_once_and_keeps_input_order(q, clock):
    before = clock.reads
    jobs = q.enqueue_many([{"n": i} for i in range(25)], delay=3)
    assert clock.reads == before + 1
    assert [j.payload for j in jobs] == [{"n": i} for i in range(25)]
    assert len({j.id for j in jobs}) == 25
    assert all(q.get_job(j.id).run_at == clock.now + timedelta(seconds=3) for j in jobs)


def test_enqueue_many_across_several_write_chunks_keeps_ids_and_payloads_paired(q, clock):
    # More rows than one COPY chunk (PostgreSQL) or one multi-row INSERT (SQLite).
    payloads = [{"n": i, "text": "é" * (i % 3)} for i in range(2_345)]
    jobs = q.enqueue_many(payloads)
    assert [j.payload for j in jobs] == payloads
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)
    stored = dict(QueueMessage.objects.values_list("id", "payload"))
    assert [stored[j.id] for j in jobs] == payloads
    assert jobs == [q.get_job(j.id) for j in jobs]


def test_a_bad_payload_past_the_first_write_chunk_rolls_back_the_rows_before_it(q):
    payloads: list[object] = [{"n": i} for i in range(2_500)]
    payloads[2_100] = {"n": float("inf")}
    with pytest.raises(PayloadError, match=r"payloads\[2100\]\['n'\]"):
        q.enqueue_many(payloads)
    assert QueueMessage.objects.count() == 0
    assert len(q.enqueue_many([{"n": i} for i in range(1_500)])) == 1_500


def test_a_bad_payload_in_enqueue_many_keeps_the_callers_transaction_usable(q):
    with transaction.atomic():
        kept = q.enqueue({"before": True})
        with pytest.raises(PayloadError):
            q.enqueue_many([*({"n": i} for i in range(1_500)), {1, 2}])
        after = q.enqueue({"after": True})
    assert sorted(QueueMessage.objects.values_list("id", flat=True)) == [kept.id, after.id]


def test_enqueue_many_takes_any_iterable_of_payloads(q):
    jobs = q.enqueue_many({"n": i} for i in range(1_200))
    assert [j.payload for j in jobs] == [{"n": i} for i in range(1_200)]


def test_enqueue_many_keeps_microseconds_and_times_before_2000(q):
    # PostgreSQL's binary COPY counts microseconds from 2000-01-01 UTC.
    before = datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    jobs = q.enqueue_many([1, 2], run_at=before, expires=timedelta(microseconds=1))
    stored = [q.get_job(j.id) for j in jobs]
    assert stored == jobs
    assert {job.run_at for job in stored} == {before}


@override_settings(USE_TZ=False, TIME_ZONE="America/New_York")
def test_enqueue_many_with_use_tz_off_stores_local_times_in_the_sites_time_zone(make_queue):
    clock = FakeClock(datetime(2030, 1, 15, 9, 30, 0, 250_000))  # naive: New York time
    naive = make_queue("naive", clock=clock)
    jobs = naive.enqueue_many([1, 2, 3], delay=60)
    single = naive.enqueue(4, delay=60)
    assert [naive.get_job(j.id) for j in jobs] == jobs
    assert {j.run_at for j in jobs} == {single.run_at} == {datetime(2030, 1, 15, 9, 31, 0, 250_000)}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT DISTINCT run_at AT TIME ZONE 'UTC' FROM alkqueue_message WHERE queue = %s",
                ["naive"],
            )
            assert cursor.fetchall() == [(datetime(2030, 1, 15, 14, 31, 0, 250_000),)]


def test_a_new_job_holds_every_field_of_job_as_its_constructor_would(q):
    jobs = [q.enqueue({"one": 1}), *q.enqueue_many([{"many": 1}, {"many": 2}])]
    for job in jobs:
        assert set(vars(job)) == {field.name for field in dataclasses.fields(Job)}
        assert dataclasses.replace(job) == job  # replace() goes through the constructor
        assert repr(job).startswith("Job(id=")
        with pytest.raises(dataclasses.FrozenInstanceError):
            job.priority = 5  # type: ignore[misc]


@override_settings(USE_TZ=False)
def test_enqueue_many_with_use_tz_off_round_trips_copys_special_characters(make_queue):
    # With naive datetimes the PostgreSQL COPY is in text format, which escapes these.
    naive = make_queue("naive", clock=FakeClock(datetime(2030, 1, 15, 9, 30)))
    payloads = [{"tab": "a\tb", "newline": "a\nb\r\n", "backslash": "C:\\dir\\"}, "\\N", None]
    jobs = naive.enqueue_many(payloads)
    assert [naive.get_job(j.id).payload for j in jobs] == payloads


def test_the_jobs_enqueue_many_returns_are_separate_values(q):
    first, second = q.enqueue_many([{"same": [1]}, {"same": [1]}])
    assert first.payload == second.payload
    assert first.payload is not second.payload
    assert first.payload["same"] is not second.payload["same"]
    with pytest.raises(AttributeError):
        first.payload = {}  # type: ignore[misc]


def test_a_payload_is_stored_as_the_standard_librarys_compact_json(q):
    payload = {"b": [1, 2.5, -0.0, None, True], "a": 'ünï\u0000\n"', "z": {}}
    job = q.enqueue(payload)
    with connection.cursor() as cursor:
        cursor.execute("SELECT payload FROM alkqueue_message WHERE id = %s", [job.id])
        [(text,)] = cursor.fetchall()
    assert text == json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "text", ['{"n":1}', ' {"n": 1}\n', "[1,2] ", "NaN", '"a"', '{"n":1}x', "\ufeff{}", "[1,", ""]
)
def test_a_stored_payload_is_decoded_exactly_as_json_loads_decodes_it(text):
    try:
        expected: object = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError, match=re.escape(exc.msg)):
            payload_codec.decode(text)
    else:
        decoded = payload_codec.decode(text)
        assert decoded == expected or (decoded != decoded and expected != expected)  # NaN


def test_a_payload_written_by_hand_with_whitespace_around_it_is_claimed_as_its_json(q):
    job = q.enqueue({"a": 1})
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE alkqueue_message SET payload = %s WHERE id = %s", ['  {"a": [1, 2]} \n', job.id]
        )
    [handle] = q.claim("w1")
    assert handle.job.payload == {"a": [1, 2]}


def test_the_size_limit_counts_utf8_bytes_not_characters(q):
    with override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": 10}):
        q.enqueue("éééé")  # 8 bytes plus two quotes
        with pytest.raises(PayloadError, match="11 bytes"):
            q.enqueue("ééééx")
    assert QueueMessage.objects.count() == 1


def test_enqueue_many_of_nothing_writes_nothing(q):
    assert q.enqueue_many([]) == []
    assert q.depth() == 0


def test_a_single_enqueue_is_one_statement(q, django_assert_num_queries):
    with django_assert_num_queries(1):
        q.enqueue({"a": 1})


def test_enqueue_many_of_one_payload_writes_the_job_enqueue_would(q, clock):
    [many] = q.enqueue_many([{"a": 1}], priority=3)
    one = q.enqueue({"a": 1}, priority=3)
    assert dataclasses.replace(many, id=one.id) == one
    assert q.get_job(many.id) == many


def test_enqueue_many_of_one_bad_payload_writes_nothing(q):
    with pytest.raises(PayloadError, match=r"payloads\[0\]"):
        q.enqueue_many([{1, 2}])
    assert QueueMessage.objects.count() == 0


def test_enqueue_many_is_all_or_nothing_on_a_bad_payload(q):
    with pytest.raises(PayloadError, match=r"payloads\[1\]"):
        q.enqueue_many([{"ok": 1}, {1, 2}, {"ok": 3}])
    assert QueueMessage.objects.count() == 0


def test_enqueue_many_round_trips_every_payload_exactly(q):
    payloads = [
        {"tab": "a\tb", "newline": "a\nb\r\n", "backslash": "C:\\dir\\", "quote": '"q"'},
        "\\N",
        ["\\", "\\\\t", None],
        {"unicode": "ünïcødé ✓ \u2028 \u0000 inside"},
        -1.5e308,
        2**80,
    ]
    jobs = q.enqueue_many(payloads)
    assert [q.get_job(job.id).payload for job in jobs] == payloads
    assert [job.payload for job in jobs] == payloads


def test_enqueue_many_stores_the_same_options_on_every_row(make_queue, clock):
    many = make_queue("opts", retention=60.5, backoff_base=0.25, lease=12)
    jobs = many.enqueue_many([1, 2, 3], delay=5, expires=3600, priority=-7, max_attempts=9)
    single = many.enqueue(4, delay=5, expires=3600, priority=-7, max_attempts=9)
    for job in jobs:
        stored = many.get_job(job.id)
        assert stored == job
        assert (stored.run_at, stored.expires_at, stored.priority, stored.max_attempts) == (
            single.run_at,
            single.expires_at,
            single.priority,
            single.max_attempts,
        )
        assert (stored.lease, stored.backoff_base, stored.retention) == (12.0, 0.25, 60.5)


def test_bare_none_is_a_valid_payload(q):
    job = q.enqueue(None)
    assert q.get_job(job.id).payload is None


@pytest.mark.parametrize(
    "payload",
    [
        {"nested": {"list": [1, 2.5, "three", None, True]}},
        [],
        "just a string",
        0,
        -1.5e308,
        1e-320,
        {"unicode": "ünïcødé ✓ \u0000 inside"},
        2**80,
    ],
)
def test_payload_round_trips_exactly(q, payload):
    got = q.get_job(q.enqueue(payload).id).payload
    assert got == payload
    assert json.dumps(got) == json.dumps(payload)


@pytest.mark.parametrize(
    ("payload", "path", "kind"),
    [
        ({"user": {"joined": __import__("datetime").date(2020, 1, 1)}},
         "payload['user']['joined']", "date"),
        ({"n": float("nan")}, "payload['n']", "nan"),
        ([1, {2, 3}], "payload[1]", "set"),
        ({"t": (1, 2)}, "payload['t']", "tuple"),
        ({1: "int key"}, "payload", "int"),
        (object(), "payload", "object"),
        ({"s": "\ud800"}, "payload['s']", "surrogate"),
        ({"ok": 1, "\udc00": 1}, "payload[", "surrogate"),
        ([1, __import__("collections").OrderedDict(a=1)], "payload[1]", "OrderedDict"),
        ({"n": [1, True, __import__("enum").IntEnum("E", "A").A]}, "payload['n'][2]", "E"),
    ],
)  # fmt: skip
def test_non_json_payload_is_refused_with_its_path_and_nothing_is_written(q, payload, path, kind):
    with pytest.raises(PayloadError) as info:
        q.enqueue(payload)
    assert path in str(info.value)
    assert kind in str(info.value)
    assert isinstance(info.value, ValueError)
    assert QueueMessage.objects.count() == 0


def test_a_payload_nested_too_deeply_is_refused_and_nothing_is_written(q):
    payload: list = []
    for _ in range(100_000):
        payload = [payload]
    with pytest.raises(PayloadError, match="nested too deeply"):
        q.enqueue(payload)
    assert QueueMessage.objects.count() == 0


def test_an_int_past_pythons_digit_limit_is_refused_and_nothing_is_written(q):
    with pytest.raises(PayloadError, match=r"cannot be encoded as JSON.*4300 digits"):
        q.enqueue({"n": 10**5000})
    assert QueueMessage.objects.count() == 0


def test_payload_at_the_size_limit_is_accepted_and_one_byte_over_is_refused(q):
    with override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": 100}):
        q.enqueue("x" * 98)  # 98 characters plus two quotes
        with pytest.raises(PayloadError, match="101 bytes"):
            q.enqueue("x" * 99)
    assert QueueMessage.objects.count() == 1


def test_oversize_payload_writes_nothing_with_the_default_limit(q):
    with pytest.raises(PayloadError, match="over the limit"):
        q.enqueue("x" * (1024 * 1024))
    assert QueueMessage.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": float("nan")}, "NaN"),
        ({"delay": float("inf")}, "at most"),
        ({"delay": 10**12}, "at most"),
        ({"delay": True}, "delay"),
        ({"expires": -5}, "expires"),
        ({"priority": 101}, "priority"),
        ({"priority": -101}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"unique_key": ""}, "unique_key"),
        ({"unique_key": "a\x00b"}, "unique_key"),
        ({"run_at": "tomorrow"}, "run_at"),
    ],
)
def test_bad_enqueue_options_raise_and_write_nothing(q, options, message):
    with pytest.raises(InvalidOption, match=message):
        q.enqueue(1, **options)
    assert QueueMessage.objects.count() == 0


def test_naive_run_at_is_refused(q, clock):
    with pytest.raises(InvalidOption, match="timezone-aware"):
        q.enqueue(1, run_at=clock.now.replace(tzinfo=None))


def test_module_level_enqueue_shortcut(clock):
    job = enqueue("shortcut", {"a": 1}, priority=5, lease=90)
    stored = queue("shortcut").get_job(job.id)
    assert (stored.queue, stored.priority, stored.lease) == ("shortcut", 5, 90.0)


def test_unique_key_returns_the_live_job_instead_of_a_second_row(q):
    first = q.enqueue({"v": 1}, unique_key="invoice-7")
    second = q.enqueue({"v": 2}, unique_key="invoice-7")
    assert second.id == first.id
    assert second.payload == {"v": 1}
    assert QueueMessage.objects.count() == 1


def test_unique_key_holds_while_claimed(q):
    first = q.enqueue(1, unique_key="k")
    q.claim("w")
    assert q.enqueue(2, unique_key="k").id == first.id


def test_unique_key_is_free_again_once_the_job_is_done(q):
    first = q.enqueue(1, unique_key="k")
    q.claim_one("w").ack()
    again = q.enqueue(2, unique_key="k")
    assert again.id != first.id
    assert q.depth() == 1


def test_unique_key_is_free_again_once_the_job_is_dead(q):
    first = q.enqueue(1, unique_key="k")
    q.claim_one("w").fail()
    assert q.enqueue(2, unique_key="k").id != first.id


def test_unique_keys_are_per_queue(make_queue):
    a = make_queue("a").enqueue(1, unique_key="k")
    b = make_queue("b").enqueue(1, unique_key="k")
    assert a.id != b.id


def test_enqueue_many_with_a_unique_key_writes_one_row(q):
    jobs = q.enqueue_many([1, 2, 3], unique_key="once")
    assert len({j.id for j in jobs}) == 1
    assert QueueMessage.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_of_one_key_create_one_row():
    ids: list[int] = []

    def enqueue_one(i: int) -> None:
        ids.append(queue("dedupe").enqueue({"i": i}, unique_key="same").id)

    run_threads(8, enqueue_one)
    assert len(set(ids)) == 1
    assert QueueMessage.objects.filter(queue="dedupe").count() == 1


def test_rollback_removes_the_enqueued_job(q):
    with pytest.raises(RuntimeError), transaction.atomic():
        q.enqueue({"order": 1})
        raise RuntimeError("view failed after enqueue")
    assert QueueMessage.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_uncommitted_job_is_invisible_to_other_connections():
    seen: list[object] = []
    with transaction.atomic():
        job = queue("tx").enqueue({"order": 1})
        run_threads(1, lambda i: seen.append(queue("tx").get_job(job.id)))
    assert seen == [None]
    assert queue("tx").get_job(job.id) is not None


@pytest.mark.django_db(transaction=True)
def test_a_claimer_cannot_see_an_uncommitted_job():
    # On SQLite too: the claim finds nothing before it asks for the writer's lock.
    seen: list[int] = []
    with transaction.atomic():
        queue("tx").enqueue({"order": 1})
        run_threads(1, lambda i: seen.extend(h.job.id for h in queue("tx").claim("other", 10)))
        assert seen == []
    [handle] = queue("tx").claim("other", 10)
    assert handle.ack()


@pytest.mark.parametrize("payloads", ["abc", b"abc", {"a": 1}])
def test_enqueue_many_refuses_a_single_payload_passed_as_the_batch(q, payloads):
    with pytest.raises(PayloadError, match="iterable of payloads"):
        q.enqueue_many(payloads)
    assert QueueMessage.objects.count() == 0


def test_the_payload_encoder_writes_the_text_json_dumps_writes():
    # Once a hand-built C encoder with a public fallback; the public encoder alone now.
    payload = {"b": [1, 2.5, None, True], "a": "ünï\u0000\n", "z": {}}
    expected = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    assert payload_codec.encode(payload, max_bytes=10**6) == expected


@pytest.fixture
def enqueued():
    """The jobs job_enqueued announces while the test runs."""
    seen: list[tuple[object, Job]] = []

    def receiver(sender: object, job: Job, **kwargs: object) -> None:
        seen.append((sender, job))

    signals.job_enqueued.connect(receiver)
    yield seen
    signals.job_enqueued.disconnect(receiver)


def test_job_enqueued_is_sent_once_per_row_written(q, enqueued):
    one = q.enqueue({"one": 1})
    many = q.enqueue_many([{"many": i} for i in range(3)])
    assert enqueued == [(Job, job) for job in [one, *many]]


def test_job_enqueued_is_not_sent_for_a_unique_key_hit(q, enqueued):
    first = q.enqueue({"n": 1}, unique_key="k")
    assert q.enqueue({"n": 2}, unique_key="k") == first
    assert enqueued == [(Job, first)]


def test_job_enqueued_is_not_sent_when_enqueue_many_writes_nothing(q, enqueued):
    with pytest.raises(PayloadError):
        q.enqueue_many([{"ok": 1}, {"bad": float("nan")}])
    assert enqueued == []


def test_a_raising_job_enqueued_receiver_does_not_undo_the_enqueue(q, caplog):
    def broken(sender: object, **kwargs: object) -> None:
        raise RuntimeError("alerting is down")

    signals.job_enqueued.connect(broken)
    try:
        job = q.enqueue({"n": 1})
    finally:
        signals.job_enqueued.disconnect(broken)
    assert q.get_job(job.id) == job
    (logged,) = [r for r in caplog.records if "alerting is down" in r.getMessage()]
    assert (logged.name, logged.levelname) == ("django.dispatch", "ERROR")  # logged once


@pytest.mark.parametrize("payloads", [5, None, bytearray(b"ab"), memoryview(b"ab")])
def test_enqueue_many_refuses_what_is_not_a_batch_of_payloads(q, payloads):
    with pytest.raises(PayloadError, match="iterable of payloads"):
        q.enqueue_many(payloads)
    assert QueueMessage.objects.count() == 0


@pytest.mark.parametrize(
    "options", [{"priority": 500}, {"max_attempts": 0}, {"delay": -1}, {"unique_key": ""}]
)
def test_an_empty_batch_with_a_bad_option_is_refused_too(q, options):
    with pytest.raises(InvalidOption):
        q.enqueue_many([], **options)


@pytest.mark.parametrize("run_at", ["garbage", 5, datetime(2026, 1, 1)])
def test_a_bad_run_at_is_refused_even_when_delay_wins(q, run_at):
    with pytest.raises(InvalidOption, match="run_at"):
        q.enqueue({}, delay=1, run_at=run_at)
    with pytest.raises(InvalidOption, match="run_at"):
        q.enqueue_many([{}], delay=1, run_at=run_at)
    assert QueueMessage.objects.count() == 0
