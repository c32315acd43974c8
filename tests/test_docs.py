"""The pages a newcomer follows hold together: each Markdown table is one table (a blank
line inside one ends it, and the rest renders as loose text), and the Python examples of the
README, the quick start and the workflows page define or import every name they use (ruff's
undefined-name check on each code block). The models diagram (make models-diagram) names
every model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.template import engines

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: The pages whose Python examples are meant to run as they stand.
RUNNABLE = ("README.md", "docs/quickstart.md", "docs/workflows.md")
#: Names an example may take from the file it goes into: a new project's settings.py.
CONTEXT_NAMES = {"BASE_DIR"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
RUFF = Path(sys.executable).parent / "ruff"


def outside_code(text: str) -> list[str]:
    return FENCE.sub(lambda m: "\n" * m[0].count("\n"), text).split("\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_table_is_split_by_a_blank_line(page):
    lines = outside_code(page.read_text())
    broken = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or i < 2 or lines[i - 1].strip():
            continue
        j = i - 1
        while j > 0 and not lines[j].strip():
            j -= 1
        starts_a_table = i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[i + 1])
        if lines[j].startswith("|") and not starts_a_table:
            broken.append(i + 1)
    assert not broken, f"{page.name}: a table row after a blank line at lines {broken}"


def python_blocks(relative: str) -> list[str]:
    return [m[2] for m in FENCE.finditer((ROOT / relative).read_text()) if m[1] == "python"]


@pytest.mark.parametrize("relative", RUNNABLE)
@pytest.mark.skipif(not RUFF.exists(), reason="ruff is in the dev venv, not make test-compat's")
def test_the_python_examples_define_what_they_use(relative, tmp_path):
    undefined = []
    for n, block in enumerate(python_blocks(relative)):
        path = tmp_path / f"block_{n}.py"
        path.write_text(block)
        found = subprocess.run(
            [str(RUFF), "check", "--isolated", "--select", "F821", "--output-format",
             "concise", str(path)], capture_output=True, text=True,
        )  # fmt: skip
        names = set(re.findall(r"Undefined name `(\w+)`", found.stdout)) - CONTEXT_NAMES
        if names:
            undefined.append((n, sorted(names), block.splitlines()[0]))
    assert not undefined, f"{relative}: {undefined}"


def test_the_quick_starts_form_posts_to_its_url_with_the_csrf_token():
    page = (ROOT / "docs" / "quickstart.md").read_text()
    (html,) = [m[2] for m in FENCE.finditer(page) if m[1] == "html"]
    template = engines["django"].from_string(html)
    rendered = template.render({"csrf_token": "the-token"})
    assert '<form method="post">' in rendered
    assert 'name="csrfmiddlewaretoken" value="the-token"' in rendered
    assert 'path("order/", place_order)' in page and "http://127.0.0.1:8000/order/" in page


def test_the_quick_start_says_how_to_keep_finished_jobs_where_it_promises_them():
    page = (ROOT / "docs" / "quickstart.md").read_text()
    section = page.split("## 6. Watch it in the admin")[1].split("## Where next")[0]
    assert "look at a job's payload and error" in section
    assert "keep=timedelta(days=7)" in section and "**Finished jobs**" in section


def test_the_models_diagram_names_every_model():
    svg = (ROOT / "docs" / "images" / "models.svg").read_text()
    drawn = set(re.findall(r"<title>django_alkqueue_models_(\w+)</title>", svg))
    models = {m.__name__ for m in apps.get_app_config("django_alkqueue").get_models()}
    assert models - drawn == set(), "run make models-diagram"
