"""docs/troubleshooting.md quotes django-alkqueue's messages word for word: each `### `...``
heading is a message, with `<placeholders>` where it varies, and must still be found in the
package's source (its string literals and templates), so the page cannot drift from the code.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "troubleshooting.md"
PACKAGE = ROOT / "django_alkqueue"
#: Messages of the database or its driver, quoted under this heading, are not ours.
FOREIGN_SECTION = "## From the database or its driver"
#: A placeholder, with the quotes repr() puts around a value.
PLACEHOLDER = re.compile(r"'?<[^<>]+>'?")
#: Where an f-string or a %-format inserts a value: no quoted fragment spans one.
GAP = "\x00"


def quoted_messages(page: str) -> list[str]:
    """The message of each `### `...`` heading above the foreign section."""
    ours = page.split(FOREIGN_SECTION)[0]
    return re.findall(r"^### `(.+)`$", ours, flags=re.MULTILINE)


def literal_text(node: ast.AST) -> str | None:
    """A string constant's text, or an f-string's with GAP where each value goes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else GAP for part in node.values
        )
    return None


@functools.cache
def source_texts() -> tuple[str, ...]:
    texts = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            text = literal_text(node)
            if text:
                texts.append(text)
    texts += [path.read_text() for path in PACKAGE.rglob("*.html")]
    return tuple(texts)


def fragments(message: str) -> list[str]:
    return [part for part in PLACEHOLDER.split(message) if part]


def found_in_order(parts: list[str], text: str) -> bool:
    position = 0
    for part in parts:
        position = text.find(part, position)
        if position < 0:
            return False
        position += len(part)
    return True


def test_the_page_quotes_messages():
    assert len(quoted_messages(PAGE.read_text())) > 50


@pytest.mark.parametrize("message", quoted_messages(PAGE.read_text()))
def test_each_quoted_message_is_in_the_package_source(message):
    parts = fragments(message)
    assert parts, f"{message!r} is placeholders only"
    texts = source_texts()
    assert any(found_in_order(parts, text) for text in texts), (
        f"{message!r}: no string literal or template of django_alkqueue/ holds "
        f"{parts!r} in this order"
    )


def test_every_check_id_has_an_entry():
    ids = set(re.findall(r"alkqueue\.[EW]\d{3}", (PACKAGE / "checks.py").read_text()))
    ids |= set(re.findall(r"alkqueue\.[EW]\d{3}", (PACKAGE / "backend.py").read_text()))
    page = PAGE.read_text()
    missing = sorted(i for i in ids if f"(checks.md#{i.replace('.', '').lower()})" not in page)
    assert ids and not missing


def test_a_placeholder_never_hides_a_gap_in_one_fragment():
    # The finder itself: a fragment that spans a value's place is not found.
    assert not found_in_order(["queue 'emails' has"], f"queue {GAP} has two consumers")
    assert found_in_order(["queue ", " has two"], f"queue {GAP} has two consumers")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (code blocks left out)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", ["troubleshooting.md", "migrating-from-procrastinate.md"])
def test_every_link_of_the_page_reaches_a_heading(page):
    text = (ROOT / "docs" / page).read_text()
    broken = [
        f"{target or page}#{anchor}"
        for target, anchor in re.findall(r"\]\(([\w.-]*\.md|)#([^)]+)\)", text)
        if anchor not in anchors(ROOT / "docs" / (target or page))
    ]
    assert not broken
