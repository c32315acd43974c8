"""Layers that only look down (issue 49): every import of the library's modules, function-level
ones included, read from the source with `ast`. A module may import its own layer's modules and
those of the layers below it, never one above.

LAYERS is the one place the layers are declared, and every module of the library is in one.
The library's modules import each other without a cycle, and a function-level import of the
library is listed in FUNCTION_LEVEL with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_alkqueue"
NAME = "django_alkqueue"

#: The layers, lowest first: (name, the modules and packages in it). A package covers its
#: submodules, unless a lower layer names one of them; "" is the package's __init__, the
#: public names. docs/architecture.md draws them and says what each holds.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Values and settings: what a job, a limit, a payload and the settings are; the models;
    # the registry of @consumer handlers; the hooks the layers above register. No state
    # change, no SQL of their own.
    ("values and settings", (
        "exceptions", "defaults", "validation", "clock", "payload", "fields", "jobs",
        "limit_values", "conf", "backoff", "consumers", "models", "limits", "fair_share",
        "error_groups", "error_text", "outcomes", "timings", "signals", "hooks", "history",
        "privacy", "running", "steps", "tracing", "tasks_compat", "check_hints",
        "workflows.specs", "workflows.graph", "deprecation",
    )),
    # The drivers: each dialect takes values and returns rows.
    ("sql", ("sql",)),
    # Every state transition, and what one does to the workflows a job is in, in its own
    # transaction (a batch's callbacks are sent through the sender queues.py registers).
    ("operations", (
        "operations", "debounce", "unique_windows", "waits", "workflows.dependencies",
        "workflows.batches", "workflows.finishing", "workflows.sweep", "workflows.standing",
        "workflows.component",
    )),
    # The public API: the queue, the Django Tasks backend and its runner.
    ("the public API", ("queues", "backend", "task_runner", "task_queues")),
    # Features built on the API, the operator's actions and their audit; and reports/, all
    # that reports on queues and workers (status, health, flow status, statistics, the
    # worker's report, the metrics and their view), read by the worker, the admin and the
    # commands above. The old paths of the reports (status, flow_status, health, metrics)
    # are deprecated aliases of them, in their layer.
    ("features and reports", (
        "workflows", "periodic", "audit", "job_filters", "job_actions", "reports", "status",
        "flow_status", "health", "metrics",
    )),
    # The processes and the pages that use all of the above.
    ("worker, admin, commands, testing", (
        "worker", "admin", "admin_site", "management", "templatetags", "testing", "checks",
        "apps", "migrations", "",
    )),
)  # fmt: skip
#: Function-level imports of the library, each with why: an import at call time hides a
#: cycle unless the module it imports needs what is not there yet (an optional package, or
#: Django's app registry).
FUNCTION_LEVEL = {
    ("sql/__init__.py", "django_alkqueue.sql.postgresql.dialect"): (
        "the PostgreSQL driver imports psycopg, which a project on another database need not "
        "install"
    ),
    ("apps.py", "django_alkqueue.checks"): "app registry: the checks import the models",
    ("apps.py", "django_alkqueue.queues"): "app registry: the queue API imports the models",
    ("reports/metrics/views.py", "django_alkqueue.reports.metrics.collector"): (
        "app registry: a URLconf loads the view where the app is missing (E103), and the "
        "collector imports the Tasks backend, which refuses to load then (E102)"
    ),
    **{
        ("testing.py", f"django_alkqueue.{name}"): (
            "app registry: pytest loads the plugin before Django is set up, and these import "
            "the models"
        )
        for name in (
            "models", "queues", "operations", "worker.acker", "worker.executor",
            "worker.inflight", "worker.served", "reports.worker_stats",
        )
    },
}  # fmt: skip


#: The packages a function may import at call time: optional ones, which a project need not
#: install (each import has a comment saying so).
OPTIONAL_PACKAGES = ("psycopg", "MySQLdb", "prometheus_client", "opentelemetry")


def is_module(dotted: str) -> bool:
    """Whether `dotted` (django_alkqueue.x.y) names a module or package of the library."""
    if not dotted.startswith(NAME + "."):
        return False
    path = PACKAGE.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def layer_of(module: str) -> int:
    """The index in LAYERS of a library module (dotted, without the package name); above
    every layer when none lists it."""
    for index, (_, members) in enumerate(LAYERS):
        if any(module == member or module.startswith(member + ".") for member in members):
            return index
    return len(LAYERS)


def module_name(path: Path) -> str:
    """`sql.postgresql.dialect` for django_alkqueue/sql/postgresql/dialect.py; a package is
    named by its __init__.py's directory."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_imports(source: str, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """Every import of the library in `source` (the module `module`): the dotted name
    imported (without the package name), and whether the import sits inside a function."""
    tree = ast.parse(source)
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    here = module.split(".") if module else []
    if not is_package:
        here = here[:-1]
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                start = [NAME, *base, *(node.module.split(".") if node.module else [])]
            else:
                start = (node.module or "").split(".")
            prefix = ".".join(start)
            # `from x import y` imports the module x.y when there is one, else a name of x.
            names = [
                f"{prefix}.{alias.name}" if is_module(f"{prefix}.{alias.name}") else prefix
                for alias in node.names
            ]
        for name in names:
            if name == NAME or name.startswith(NAME + "."):
                found.append((name.removeprefix(NAME).lstrip("."), id(node) in inside))
    return found


def layer_name(module: str) -> str | None:
    """The name of the layer listing `module`; None when none does."""
    index = layer_of(module)
    return LAYERS[index][0] if index < len(LAYERS) else None


def library_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def imports_of(path: Path) -> list[tuple[str, bool]]:
    return library_imports(path.read_text(), module_name(path), path.name == "__init__.py")


def where(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", library_modules(), ids=where)
def test_a_module_imports_nothing_from_a_layer_above_its_own(path: Path) -> None:
    own = layer_of(module_name(path))
    above = [name for name, _ in imports_of(path) if layer_of(name) > own]
    assert above == [], f"{LAYERS[own][0]} imports from above: {above}"


@pytest.mark.parametrize("path", library_modules(), ids=where)
def test_a_module_imports_the_library_at_call_time_only_for_a_listed_reason(path: Path) -> None:
    late = [name for name, in_function in imports_of(path) if in_function]
    assert [name for name in late if (where(path), NAME + "." + name) not in FUNCTION_LEVEL] == []


def test_every_listed_function_level_import_is_still_there() -> None:
    # A reason left behind for an import that is gone would let one come back unseen.
    found = {(where(path), NAME + "." + name)
             for path in library_modules()
             for name, in_function in imports_of(path) if in_function}  # fmt: skip
    assert set(FUNCTION_LEVEL) - found == set()


def function_level_imports(source: str) -> list[tuple[str, int]]:
    """Every import inside a function of `source`, library or not: the module named (relative
    ones with their dots) and its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.walk(node):
                if isinstance(child, ast.Import):
                    found += [(alias.name, child.lineno) for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    found.append(("." * child.level + (child.module or ""), child.lineno))
    return found


def has_reason(lines: list[str], lineno: int) -> bool:
    """Whether the import on line `lineno` (1-based) says why: a comment on its line, or on
    the line above it and the imports it heads."""
    if "#" in lines[lineno - 1]:
        return True
    above = lineno - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and "#" in lines[above]


@pytest.mark.parametrize("path", library_modules(), ids=where)
def test_a_function_imports_only_an_optional_package_or_the_library_and_says_why(
    path: Path,
) -> None:
    source = path.read_text()
    lines = source.splitlines()
    late = function_level_imports(source)
    allowed = (*OPTIONAL_PACKAGES, NAME)
    others = [name for name, _ in late
              if not name.startswith(".") and name.split(".")[0] not in allowed]  # fmt: skip
    assert others == [], "import these at the module's top"
    assert [f"line {line}: {name}" for name, line in late if not has_reason(lines, line)] == []


def test_the_reason_reader_reads_the_comment_above_a_block_of_imports() -> None:
    lines = ["def f():", "    # psycopg: optional", "    import psycopg", "    from x import y",
             "    import z", "def g():", "    import w"]  # fmt: skip
    assert [has_reason(lines, n) for n in (3, 4, 7)] == [True, True, False]
    assert function_level_imports("def f():\n    from ..a import b\n") == [("..a", 2)]


def import_graph() -> dict[str, set[str]]:
    """Every library module -> the library modules it imports, at any depth."""
    return {
        module_name(path): {name for name, _ in imports_of(path) if name != module_name(path)}
        for path in library_modules()
    }


def cycle_in(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of `graph` (module -> the modules it imports) as the modules along it, first
    repeated last; [] when there is none."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for target in sorted(graph.get(node, ())):
            found = walk(target, [*path, node])
            if found:
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        found = walk(start, [])
        if found:
            return found
    return []


def test_the_modules_of_the_library_import_each_other_without_a_cycle() -> None:
    assert cycle_in(import_graph()) == []


def test_the_cycle_finder_finds_one() -> None:
    graph = {"sql.base": {"sql.limited_claim"}, "sql.limited_claim": {"sql.orm"},
             "sql.orm": {"sql.base"}, "sql.sqlite": {"sql.base"}}  # fmt: skip
    assert cycle_in(graph) == ["sql.base", "sql.limited_claim", "sql.orm", "sql.base"]
    del graph["sql.orm"]
    assert cycle_in(graph) == []


def test_every_module_the_layers_name_exists() -> None:
    for _, members in LAYERS:
        for member in members:
            assert member == "" or is_module(f"{NAME}.{member}"), member


def test_every_module_of_the_library_is_in_a_layer() -> None:
    assert [where(p) for p in library_modules() if layer_name(module_name(p)) is None] == []


def test_the_reader_finds_top_level_relative_and_function_level_imports() -> None:
    source = (
        "from .. import payload as codec\n"
        "from ..history import HistoryEntry\n"
        "from . import base, orm\n"
        "import django_alkqueue.queues\n"
        "from django.db import connection\n"
        "def late():\n"
        "    from ..worker import runner\n"
    )
    found = library_imports(source, "sql.limited_claim", is_package=False)
    assert sorted(found) == [
        ("history", False),
        ("payload", False),
        ("queues", False),
        ("sql.base", False),
        ("sql.orm", False),
        ("worker.runner", True),
    ]


def test_the_reader_resolves_the_package_and_its_public_names() -> None:
    found = library_imports("from django_alkqueue import queue\n", "sql.base", is_package=False)
    assert found == [("", False)]
    assert layer_of("") == len(LAYERS) - 1
    assert module_name(PACKAGE / "__init__.py") == ""


def test_an_import_from_above_is_caught() -> None:
    imports = library_imports("from ..queues import Queue\n", "sql.base", is_package=False)
    assert [layer_of(name) > layer_of("sql.base") for name, _ in imports] == [True]


def test_a_lower_layer_wins_for_a_module_of_a_package_above() -> None:
    # workflows/ is a feature, but its rows and its JobSpec are below the queue API.
    assert LAYERS[layer_of("workflows.specs")][0] == "values and settings"
    assert LAYERS[layer_of("workflows.batches")][0] == "operations"
    assert LAYERS[layer_of("workflows.chains")][0] == "features and reports"


def test_the_reports_sit_below_the_worker_and_the_admin_that_read_them() -> None:
    # reports/ holds the metrics' view too: it imports only the settings, the clock and the
    # collector, so nothing of it looks up.
    for report in ("reports.worker_stats", "reports.worker_report", "reports.database_health",
                   "reports.metrics.views", "reports.metrics.urls"):  # fmt: skip
        assert LAYERS[layer_of(report)][0] == "features and reports"
    for reader in ("worker.runner", "admin.overview", "management.commands.alk_status"):
        assert layer_of(reader) > layer_of("reports")
