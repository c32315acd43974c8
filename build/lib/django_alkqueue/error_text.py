"""The size cap on stored error text: the head and the tail of a traceback are kept.

A traceback's head names the exception and its tail the line that raised, so a text over
the cap loses its middle, where a marker says how much was cut.
"""

from __future__ import annotations

from .defaults import MAX_ERROR_CHARS


def capped(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`text` itself when it fits in `limit` characters, else its head and tail around a
    marker, `limit` characters in all."""
    if len(text) <= limit:
        return text
    marker = ""
    for _ in range(3):  # the marker's length depends on the count it names: let it settle
        kept = max(limit - len(marker), 0)
        marker = f"\n\n[... {len(text) - kept:,} characters cut by django-alkqueue ...]\n\n"
    kept = max(limit - len(marker), 0)
    head = (kept + 1) // 2
    return (text[:head] + marker + text[len(text) - (kept - head) :])[:limit]


def capped_or_none(text: str | None) -> str | None:
    return None if text is None else capped(text)
