"""Short versions run in `make test`; CHAOS_LONG=1 (`make chaos`) selects the long ones."""

from __future__ import annotations

import os
from typing import TypeVar

LONG = os.environ.get("CHAOS_LONG", "") not in ("", "0")
MODE = "long" if LONG else "short"


T = TypeVar("T")


def pick(short: T, long: T) -> T:  # noqa: UP047 (make test-compat runs on Python 3.11)
    """The size of a scenario in this mode."""
    return long if LONG else short
