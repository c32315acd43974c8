"""Every change to a job row in one named function per transition (issue 49, point 4), read
from the source: each dialect writes dead letters in one place, which fail, crashed, the
sweep, the reclaim, the claims and a failed dependency all reach through it; the workflows
and the durable waits write no job row themselves."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "django_alkqueue"

#: Where a dead letter is written: an INSERT into its table, or the model's create.
DEAD_LETTER_WRITE = re.compile(
    r"INSERT INTO \{DEAD_LETTER_TABLE\}|DeadLetter\.objects\.using\([^)]*\)\.(bulk_)?create"
)
#: The one place of each dialect (PostgreSQL's is the INSERT its statements share).
DEAD_LETTER_PLACES = {"sql/orm.py", "sql/sqlite.py", "sql/postgresql/statements.py"}
#: A write to the live table through the ORM.
JOB_ROW_WRITE = re.compile(r"QueueMessage\.objects[^\n]*\.(update|delete|create|bulk_create)\(")


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text()
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
    }


def test_each_dialect_writes_dead_letters_in_one_place():
    places = {name: len(DEAD_LETTER_WRITE.findall(text)) for name, text in sources().items()}
    assert {name: n for name, n in places.items() if n} == dict.fromkeys(DEAD_LETTER_PLACES, 1)


def test_the_workflows_and_the_durable_waits_write_no_job_row():
    writes = [
        f"{name}: {line.strip()}"
        for name, text in sources().items()
        if name.startswith("workflows/") or name == "waits.py"
        for line in text.splitlines()
        if JOB_ROW_WRITE.search(line) or ("live.filter(" in line and ".update(" in line)
    ]
    assert writes == []
