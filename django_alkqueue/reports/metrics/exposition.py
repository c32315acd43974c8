"""Prometheus's text exposition format (0.0.4), written directly: with 1,000 queues a scrape
has some 26,000 samples, and building prometheus_client's Metric and Sample objects and
formatting them with generate_latest took longer than every query of the scrape together
(docs/benchmarks.md, "The scrape"). The output is the same text; the tests parse it with
prometheus_client's own parser.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def label(name: str, value: str) -> str:
    """`name="value"`, the value escaped as the format asks (backslash, quote, newline)."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return f'{name}="{escaped}"'


def number(value: float) -> str:
    """A sample value: an integer as it is (most samples are counts), any other number as a
    float (MySQL sums are Decimals), with the format's +Inf, -Inf and NaN."""
    if type(value) is int:
        return str(value)
    as_float = float(value)
    if as_float - as_float == 0.0:  # finite
        return repr(as_float)
    if as_float != as_float:
        return "NaN"
    return "+Inf" if as_float > 0 else "-Inf"


class Exposition:
    """The lines of one scrape. A family's samples follow its HELP and TYPE lines at once."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self.lines += (f"# HELP {name} {escaped}", f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: str, value: float) -> None:
        """One sample; `labels` is "" or the inside of the braces (label() pairs, comma-joined)."""
        self.lines.append(
            f"{name}{{{labels}}} {number(value)}" if labels else f"{name} {number(value)}"
        )

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
