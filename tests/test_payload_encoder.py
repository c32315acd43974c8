"""The one private name the library keeps: CPython's C JSON encoder, built once in
payload._compact_encoder() (docs/benchmarks.md, "The driver's hot path"). These fail loudly
when CPython changes it, rather than let payloads be stored differently."""

from __future__ import annotations

import json.encoder
import math

import pytest

from django_alkqueue import payload
from django_alkqueue.exceptions import PayloadError

SAMPLES = [
    {},
    {"i": 1, "user": "alice@example.com", "tags": ["a", "b"], "ok": True, "none": None},
    {"text": "héllo \u2603 \U0001f600", "quote": 'a"b\\c\n\t', "nul": "\x00"},
    [1, -2, 3.5, 1e300, -0.0, 10**30, "x", [], [[{}]]],
    {"nested": {"deeper": {"deepest": [0.1, 2.5e-8, 123456789.125]}}},
    "a string",
    12,
    None,
]


def test_cpython_still_has_the_c_encoder_the_payload_codec_builds():
    make = getattr(json.encoder, "c_make_encoder", None)
    assert make is not None, (
        "json.encoder.c_make_encoder is gone: payload._compact_encoder() falls back to the "
        "public JSONEncoder; check docs/benchmarks.md and drop the exception"
    )
    assert payload._ENCODE is not payload._PUBLIC_ENCODER.encode


@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_the_kept_encoder_writes_exactly_what_the_public_one_writes(value):
    assert payload._ENCODE(value) == payload._PUBLIC_ENCODER.encode(value)


def test_the_kept_encoder_refuses_what_the_public_one_refuses():
    with pytest.raises(ValueError):
        payload._ENCODE({"x": math.nan})
    with pytest.raises(TypeError):
        payload._ENCODE({"x": object()})


def test_a_stored_payload_decodes_as_json_loads_decodes_it():
    for value in SAMPLES:
        text = payload.encode(value, max_bytes=10**6)
        assert payload.decode(text) == json.loads(text)
    for bad in ("\ufeff{}", "{} x", " ", "{"):
        with pytest.raises(json.JSONDecodeError):
            payload.decode(bad)
    with pytest.raises(PayloadError):
        payload.encode({"x": math.inf}, max_bytes=10**6)


@pytest.mark.parametrize("text", [' {"a": 1}', '{"a": 1}\n', "\t[1, 2] ", " 12 "])
def test_a_text_with_whitespace_around_it_decodes_as_json_loads_decodes_it(text):
    assert payload.decode(text) == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": 1} {"b": 2}', "12 3", "[1]]", "\ufeff[1]"])
def test_a_text_with_more_than_one_document_fails_with_json_loads_message(text):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        payload.decode(text)
    assert str(got.value) == str(expected.value)
