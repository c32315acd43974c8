"""One driver per database, public APIs only (issue 31, points 1 and 2): read from the source.

Only `sql/postgresql/` knows psycopg; nothing in the package uses the private psycopg,
Django or CPython names the hot path once leaned on, nor hangs attributes of its own on
their objects.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_alkqueue"
DRIVER = PACKAGE / "sql" / "postgresql"

#: Undocumented names, each with where it came from: a patch release may change any of them.
FORBIDDEN_NAMES = {
    "generators": "psycopg.generators (psycopg's internal protocol generators)",
    "error_from_result": "psycopg.errors.error_from_result",
    "Transformer": "psycopg.adapt.Transformer",
    "pgconn": "psycopg's libpq wrapper (conn.info is the documented one)",
    "pipeline_status": "pgconn.pipeline_status (conn.info.pipeline_status is documented)",
    "health_check_enabled": "Django's BaseDatabaseWrapper internals",
    "health_check_done": "Django's BaseDatabaseWrapper internals",
    "close_if_health_check_failed": "Django's BaseDatabaseWrapper internals",
    "wrap_database_errors": "Django's BaseDatabaseWrapper internals",
    "validate_thread_sharing": "Django's BaseDatabaseWrapper internals",
    "psycopg_any": "django.db.backends.postgresql.psycopg_any",
    "_get_running_loop": "asyncio.events._get_running_loop",
    "scan_once": "json.JSONDecoder.scan_once",
    "c_make_encoder": "json.encoder.c_make_encoder",
}
#: psycopg.Connection's own lock and wait(), undocumented.
FORBIDDEN_CONNECTION_ATTRIBUTES = {"lock", "wait"}
#: The one private name kept, in one function, with a test of its own
#: (tests/test_payload_encoder.py).
ALLOWED = {("payload.py", "c_make_encoder")}


def _modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _used_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(node.module.split("."))
    return names


def test_nothing_outside_the_postgresql_driver_imports_psycopg():
    importers = [
        str(path.relative_to(PACKAGE))
        for path in _modules(PACKAGE)
        if DRIVER not in path.parents
        and any(name.split(".")[0] in ("psycopg", "psycopg2") for name in _imported(_tree(path)))
    ]
    assert importers == []


def test_the_driver_does_import_psycopg():
    # The check above would pass on a tree it cannot read: it must see the imports that exist.
    assert any("psycopg" in _imported(_tree(path)) for path in _modules(DRIVER))


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_psycopg_django_or_json_name_is_used(path):
    used = _used_names(_tree(path))
    found = {
        name: origin
        for name, origin in FORBIDDEN_NAMES.items()
        if name in used and (path.name, name) not in ALLOWED
    }
    assert found == {}


def test_the_forbidden_name_check_finds_a_use():
    tree = ast.parse("from psycopg.generators import execute\nconn.pgconn.pipeline_status")
    assert {"generators", "pgconn", "pipeline_status"} <= _used_names(tree)


@pytest.mark.parametrize("path", _modules(DRIVER), ids=lambda p: p.name)
def test_the_driver_uses_no_private_member_of_a_psycopg_connection(path):
    calls = [
        node.attr
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute)
        and node.attr in FORBIDDEN_CONNECTION_ATTRIBUTES
        and isinstance(node.value, ast.Name)
        and node.value.id in ("conn", "connection")
    ]
    assert calls == []


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_attribute_of_the_librarys_is_hung_on_another_object(path):
    # setattr()/getattr() with a name of ours ("_alkqueue_...") was how the kept cursor and
    # the NOTIFY window lived on psycopg's and Django's objects; weak maps hold them now.
    strings = [
        node.value
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("_alkqueue_")
    ]
    setattrs = [
        node
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("setattr", "delattr")
    ]
    assert (strings, setattrs) == ([], [])
