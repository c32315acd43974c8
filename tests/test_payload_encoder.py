"""The payload codec: the standard library's public json, compact, without its
circular-reference markers (payload.encode walks the value first); it writes and reads
exactly what json.dumps and json.loads do (docs/benchmarks.md, "The driver's hot path")."""

from __future__ import annotations

import json
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


def test_the_payload_codec_is_the_public_json_encoder():
    # CPython's C encoder (json.encoder.c_make_encoder) was built by hand here once; the
    # documented JSONEncoder is what encodes now.
    assert payload._ENCODE.__self__.__class__ is json.JSONEncoder
    assert not hasattr(payload, "_compact_encoder")


def test_a_payload_that_holds_itself_is_refused_without_a_stack_overflow():
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(PayloadError, match="nested too deeply"):
        payload.encode(cyclic, max_bytes=10**6)


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
