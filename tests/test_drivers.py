"""One driver per database, public APIs only (issue 31, points 1 and 2; issue 49, point 6):
read from the source.

Each database driver (psycopg, MySQLdb, sqlite3) is imported only by the modules its entry
in DRIVER_MODULES allows, and the driver's own connection and cursor objects are reached
through Django only by RAW_CONNECTION_MODULES. Nothing in the package uses the private
psycopg, Django or CPython names the library once leaned on (FORBIDDEN_NAMES), builds a
frozen value past its constructor, reads another module's private members
(PRIVATE_MEMBERS), or hangs attributes of its own on other objects.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_alkqueue"
DRIVER = PACKAGE / "sql" / "postgresql"

#: The modules (paths under django_alkqueue/) that may import each database driver; no other
#: module may. MySQLdb and sqlite3 are reached through Django's ORM and cursors only.
DRIVER_MODULES: dict[str, set[str]] = {
    "psycopg": {"sql/postgresql/session.py", "sql/postgresql/listen.py"},
    "psycopg2": set(),
    "MySQLdb": set(),
    "sqlite3": set(),
}
#: The modules that may reach a driver's own connection or cursor through Django's wrappers
#: (`connection.connection`, `cursor.cursor`): the PostgreSQL driver's, and the worker's
#: connection hygiene, which only asks whether one is open (`connection.connection is None`).
RAW_CONNECTION_MODULES = {
    "sql/postgresql/dialect.py", "sql/postgresql/session.py", "sql/postgresql/listen.py",
    "sql/postgresql/limited_claim.py", "sql/postgresql/history.py",
    "sql/postgresql/statements.py", "sql/postgresql/copy_rows.py",
    "sql/postgresql/__init__.py", "worker/connections.py",
}  # fmt: skip

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
    "errors_occurred": "Django's BaseDatabaseWrapper internals (is_usable() is documented)",
    "queries_logged": "Django's BaseDatabaseWrapper internals",
    "force_debug_cursor": "Django's BaseDatabaseWrapper internals",
    "execute_wrappers": "Django's BaseDatabaseWrapper internals (execute_wrapper() is documented)",
    "get_new_connection": "Django's BaseDatabaseWrapper internals (psycopg.connect is documented)",
    "get_connection_params": "Django's BaseDatabaseWrapper internals",
    "psycopg_any": "django.db.backends.postgresql.psycopg_any",
    "_return_value": "django.tasks' TaskResult internals",
    "get_filters_params": "Django's ChangeList internals (ModelAdmin's hooks are documented)",
    "_get_running_loop": "asyncio.events._get_running_loop",
    "scan_once": "json.JSONDecoder.scan_once",
    "c_make_encoder": "json.encoder.c_make_encoder",
    "encode_basestring": "json.encoder.encode_basestring",
    "_bury_ids": "the ORM rows' private dead-letter helper",
}
#: psycopg.Connection's own lock and wait(), undocumented.
FORBIDDEN_CONNECTION_ATTRIBUTES = {"lock", "wait"}
#: Private members of the library's own objects, each with the one module that owns it: no
#: other module reads them off an object (`self._run` of a class of its own is another name).
PRIVATE_MEMBERS = {
    "_finish": "queues.py",  # JobHandle's; the worker has settled_by_worker()
    "_finished": "queues.py",
    "_recorded": "queues.py",
    "_run": "running.py",  # RunningJob's; the worker has running.run_of()
}


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
        # getattr(x, "name"), object.__setattr__(x, "name", value)
        elif isinstance(node, ast.Constant) and str(node.value).isidentifier():
            names.add(str(node.value))
    return names


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("driver", DRIVER_MODULES)
def test_only_the_allowed_modules_import_each_driver(driver):
    importers = {
        _relative(path)
        for path in _modules(PACKAGE)
        if any(name.split(".")[0] == driver for name in _imported(_tree(path)))
    }
    assert importers <= DRIVER_MODULES[driver]


def test_the_driver_does_import_psycopg():
    # The check above would pass on a tree it cannot read: it must see the imports that exist.
    importers = {_relative(p) for p in _modules(PACKAGE) if "psycopg" in _imported(_tree(p))}
    assert importers == DRIVER_MODULES["psycopg"]


def _raw_connection_uses(tree: ast.Module) -> list[str]:
    """`X.connection.connection` and `X.cursor.cursor` or `cursor.cursor`: a driver's own
    connection or cursor reached through Django's wrapper."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("connection", "cursor"):
            inner = node.value
            name = inner.attr if isinstance(inner, ast.Attribute) else getattr(inner, "id", None)
            if name == node.attr:
                found.append(f"{name}.{node.attr}")
    return found


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
def test_only_the_allowed_modules_reach_a_drivers_own_connection(path):
    if _relative(path) not in RAW_CONNECTION_MODULES:
        assert _raw_connection_uses(_tree(path)) == []


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
def test_no_private_psycopg_django_or_json_name_is_used(path):
    used = _used_names(_tree(path))
    found = {name: origin for name, origin in FORBIDDEN_NAMES.items() if name in used}
    assert found == {}


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
def test_no_module_reads_another_modules_private_members(path):
    read = {
        node.attr
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute)
        and node.attr in PRIVATE_MEMBERS
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    }
    assert {name for name in read if PRIVATE_MEMBERS[name] != _relative(path)} == set()


#: The one construction past a constructor, worth more than 10% of the bulk enqueue and the
#: drain (its docstring; tests/test_frozen_values.py guards it): module, function.
PAST_THE_CONSTRUCTOR = ("jobs.py", "without_init")


def _outside_the_exception(path: Path) -> ast.Module:
    tree = _tree(path)
    if _relative(path) != PAST_THE_CONSTRUCTOR[0]:
        return tree
    kept = [
        node
        for node in tree.body
        if not (isinstance(node, ast.FunctionDef) and node.name == PAST_THE_CONSTRUCTOR[1])
    ]
    assert len(kept) == len(tree.body) - 1, "the exception's function is gone: drop it here"
    return ast.Module(body=kept, type_ignores=[])


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
def test_no_frozen_value_is_built_past_its_constructor(path):
    # object.__new__(Job) and a __dict__ written in were how Job and RunningJob were made;
    # jobs.without_init is the one place left that does (PAST_THE_CONSTRUCTOR).
    bypasses = [
        ast.unparse(node)
        for node in ast.walk(_outside_the_exception(path))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "object"
        and (
            node.func.attr == "__new__"
            or (
                node.func.attr == "__setattr__"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in ("__dict__", "__class__")
            )
        )
    ]
    assert bypasses == []


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
def test_no_class_overrides_djangos_changelist(path):
    # ChangeList's methods are undocumented; ModelAdmin's hooks (get_queryset,
    # get_search_results, get_list_filter, get_changelist_instance) are the API.
    subclasses = [
        node.name
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).split(".")[-1] == "ChangeList" for base in node.bases)
    ]
    assert subclasses == []


def test_the_forbidden_name_check_finds_a_use():
    tree = ast.parse("from psycopg.generators import execute\nconn.pgconn.pipeline_status")
    assert {"generators", "pgconn", "pipeline_status"} <= _used_names(tree)


def test_the_checks_find_what_came_back():
    # Each private use issue 49 removed, as it was written: the checks above must see it.
    source = (
        "import json.encoder\n"
        "make = json.encoder.c_make_encoder\n"
        "object.__setattr__(result, '_return_value', value)\n"
        "if connection.errors_occurred or connection.queries_logged: pass\n"
        "connection.get_new_connection(connection.get_connection_params())\n"
        "rows._bury_ids(ids)\n"
    )
    assert set(FORBIDDEN_NAMES) & _used_names(ast.parse(source)) == {
        "c_make_encoder", "_return_value", "errors_occurred", "queries_logged",
        "get_new_connection", "get_connection_params", "_bury_ids",
    }  # fmt: skip
    tree = ast.parse("job = object.__new__(Job)\nobject.__setattr__(job, '__dict__', f)")
    bypasses = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert len(bypasses) == 2
    raw = ast.parse("cursor.cursor.copy(x)\nc.connection.connection")
    assert sorted(_raw_connection_uses(raw)) == ["connection.connection", "cursor.cursor"]


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


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=_relative)
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
