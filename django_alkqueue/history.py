"""History: which queues keep their finished jobs, for how long, and what is recorded.

A queue keeps when its @consumer says `keep=...` or ALKQUEUE["QUEUES"][name]["keep"] does.
Each of its finished jobs (acked, or cancelled while running) is then written to the
FinishedJob table in the transaction of its ack, with the handler's return value as JSON
(at most ALKQUEUE["MAX_OUTPUT_BYTES"]); an output that cannot be recorded is replaced by a
note and never fails the job (docs/running-jobs.md, "History and recorded output").
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from .conf import get_settings
from .consumers import registry
from .error_text import headline
from .jobs import HistoryEntry
from .validation import storable_copy

#: The encoder of recorded output: strict JSON (no NaN), compact, non-ASCII kept.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def keep_for(queue: str) -> float | None:
    """Seconds the queue keeps its finished jobs; None when it keeps none (the default)."""
    spec = registry.get(queue)
    if spec is not None and spec.keep is not None:
        return spec.keep
    keep = get_settings().QUEUES.get(queue, {}).get("keep")
    if keep is None:
        return None
    return float(keep.total_seconds() if hasattr(keep, "total_seconds") else keep)


def keeping_queues() -> set[str]:
    """The queues whose @consumer or ALKQUEUE["QUEUES"] entry sets a keep."""
    named = {spec.queue for spec in registry.all() if spec.keep is not None}
    options = get_settings().QUEUES
    return named | {name for name, option in options.items() if option.get("keep") is not None}


def recorded_output(value: Any, limit: int) -> tuple[str | None, str | None]:
    """(the value as JSON text, None), or (None, why it was not recorded). None records
    nothing; a value that is not JSON, or is longer than `limit` bytes, gives a note."""
    if value is None:
        return None, None
    try:
        text = _ENCODER.encode(value)
        size = len(text.encode())
    except UnicodeEncodeError:
        return None, "output not recorded: a str with an unpaired surrogate"
    except Exception as exc:  # the handler's value: whatever its encoding raises, it is done
        return None, storable_copy(f"output not recorded: not JSON ({headline(exc)})"[:500])
    if size > limit:
        return None, (
            f"output not recorded: {size} bytes, more than ALKQUEUE['MAX_OUTPUT_BYTES'] ({limit})"
        )
    return text, None


def entry_for(queue: str, value: Any, duration: float | None) -> HistoryEntry | None:
    """The HistoryEntry of a job of `queue` whose handler returned `value` after `duration`
    seconds; None when the queue keeps no history (nothing is encoded then)."""
    keep = keep_for(queue)
    if keep is None:
        return None
    output, error = recorded_output(value, get_settings().MAX_OUTPUT_BYTES)
    return HistoryEntry(keep, duration, output, error)


#: The names these had before they said "history" (docs/running-jobs.md): they still work,
#: with a DeprecationWarning.
_RENAMED = {"Finish": ("HistoryEntry", HistoryEntry), "finish": ("entry_for", entry_for)}


def __getattr__(name: str) -> object:
    if name not in _RENAMED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new_name, value = _RENAMED[name]
    warnings.warn(
        f"history.{name} is deprecated; use history.{new_name}", DeprecationWarning, stacklevel=2
    )
    return value
