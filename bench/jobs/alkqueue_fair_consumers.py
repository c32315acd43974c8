"""The consumers of the fair-share bench (bench/fair_share.py): one no-op queue per way of
keying the jobs compared (no fair key, one, 1,000)."""

from __future__ import annotations

from typing import Any

from django_alkqueue import Job, consumer

from . import noop


@consumer("fair-none")
def none(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("fair-one")
def one(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("fair-many")
def many(payload: Any, job: Job) -> None:
    noop(payload)
