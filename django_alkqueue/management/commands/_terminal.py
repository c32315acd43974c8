"""Text for the operator's terminal. The strings the commands print come from the tables
(worker ids, host names, concurrency keys, progress notes), which any handler, worker or SQL
session can write: a control character among them could move the cursor, clear the screen,
change the terminal's title or start a fake table row. Each is printed escaped, the way the
`--json` output escapes it."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import datetime

from django_alkqueue.jobs import Progress

#: Unicode categories printed as escapes: controls (C0, DEL, C1: escape sequences, newlines),
#: format characters (bidirectional overrides and isolates that reorder a line, zero-width
#: ones), surrogates, and the line and paragraph separators.
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def printable(text: str) -> str:
    """`text` with each escaped character (ESCAPED_CATEGORIES) written as `\\x1b`, `\\n`,
    `\\u202e`, ..., and each backslash doubled so that an escape cannot be faked."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case: nothing to escape
    return "".join(map(_escaped, text))


def _escaped(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if unicodedata.category(char) not in ESCAPED_CATEGORIES:
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    """The rows under their header, in columns; every cell printable (control characters
    and the like escaped), so that no stored string reaches the terminal raw."""
    header = tuple(map(printable, header))
    body = [tuple(map(printable, row)) for row in body]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *body]]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def progress_text(progress: Progress) -> str:
    """done/total (percent), or done alone without a total."""
    if progress.total is None:
        return f"{progress.done:g}"
    fraction = progress.fraction()
    percent = "" if fraction is None else f" ({round(fraction * 100)}%)"
    return f"{progress.done:g}/{progress.total:g}{percent}"


def json_default(value: object) -> str:
    """For --json: timestamps as ISO 8601 (`2026-12-01T04:47:51.189404+00:00`), what JSON
    readers parse."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
