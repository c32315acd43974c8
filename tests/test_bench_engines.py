"""The bench's MariaDB and SQLite rows (issue 53, bench/tables.py and bench/targets.py): each
engine's targets and table read django-alkqueue against that engine's raw loops, and an engine
whose systems a run lacks reads "not measured" (the targets) and "not measured yet" (the
table) instead of a figure or an error. A full run's results without them (every run before
issue 53) still render."""

from typing import Any

from bench import tables, targets


def _fig(value: float) -> dict[str, Any]:
    return {"median": value, "min": value, "max": value, "n": 1, "values": [value]}


def _system(config: str, drain_2: float, single: float, bulk: float) -> dict[str, Any]:
    return {
        "enqueue_single": {"jobs_per_s": _fig(single)},
        "enqueue_bulk": {"jobs_per_s": _fig(bulk)},
        "variants": [{
            "config": config,
            "drain_2": {"jobs_per_s": _fig(drain_2), "cpu_ms_per_job": _fig(0.05),
                        "server_cpu_ms_per_job": _fig(0.02),
                        "server_statements_per_job": _fig(drain_2 / 1000)},
            "latency": {"p50_ms": _fig(4.0), "p99_ms": _fig(30.0)},
        }],
    }  # fmt: skip


def _items(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["key"]: i for i in targets.engine_items(results)}


def test_engines_without_their_systems_read_not_measured() -> None:
    items = _items({"systems": {}})
    assert len(items) == 8  # 4 per engine
    assert {i["ok"] for i in items.values()} == {None}
    assert items["mariadb_drain_raw"]["measured"] == "not measured"
    text = tables.engines_table({"systems": {}})
    assert "MariaDB: not measured yet" in text and "SQLite: not measured yet" in text
    assert "|" not in text  # no table of dashes


def test_mariadb_against_its_raw_loops() -> None:
    results = {"systems": {
        "alkqueue_mariadb": _system("--concurrency 4 --batch 200", 7000, 300, 4000),
        "raw_mariadb": {**_system("claim 100 per tx", 10000, 500, 20000), "variants": [
            {"config": "claim 1 per tx", "drain_2": {"jobs_per_s": _fig(500)}},
            *_system("claim 100 per tx", 10000, 500, 20000)["variants"],
        ]},
    }}  # fmt: skip
    items = _items(results)
    # The drain reads raw claim-100, not the first raw variant (claim 1).
    assert items["mariadb_drain_raw"]["ok"] is True  # 70% exactly
    assert items["mariadb_drain_raw"]["measured"] == "7,000 / 10,000 jobs/s = 70%"
    assert items["mariadb_enqueue_single"]["ok"] is False  # 60%
    assert items["mariadb_enqueue_bulk"]["ok"] is False  # 20%
    assert items["mariadb_pickup"]["ok"] is True
    assert items["sqlite_drain_raw"]["ok"] is None
    text = tables.engines_table(results)
    assert "| MariaDB | drain, 2 processes, jobs/s | 7,000 | 10,000 | 70% |" in text
    assert "| MariaDB | server CPU per job, ms (drain, 2 processes) |" in text
    statements = "| MariaDB | server statements per job (drain, 2 processes) | 7.00 | 10.00 | 70% |"
    assert statements in text
    assert "SQLite: not measured yet" in text


def test_one_engine_system_missing_leaves_dashes() -> None:
    results = {"systems": {"alkqueue_sqlite": _system("--concurrency 4", 5000, 2500, 20000)}}
    items = _items(results)
    assert items["sqlite_drain_raw"]["ok"] is None
    assert items["sqlite_pickup"]["ok"] is True
    text = tables.engines_table(results)
    assert "| SQLite | drain, 2 processes, jobs/s | 5,000 | - | - |" in text
    assert "server CPU" not in text and "statements" not in text  # SQLite has no server


def test_enqueue_targets_read_side_by_side_where_the_run_has_it() -> None:
    """The separate windows drift apart on a loaded machine (a raw INSERT at half of ours in
    one quick run): the turns taken in one window are what the targets read."""
    ours = _system("--concurrency 4", 7000, 400, 4000)
    ours["side_by_side"] = {
        "single": {"n": 500, "chunk": 50, "ratio": _fig(0.8),
                   "jobs_per_s": {"raw": _fig(300), "alkqueue": _fig(240)}},
        "bulk": {"n": 2000, "chunk": 2000, "ratio": _fig(0.4),
                 "jobs_per_s": {"raw": _fig(20000), "alkqueue": _fig(9000)}},
    }  # fmt: skip
    results = {
        "systems": {
            "alkqueue_mariadb": ours,
            "raw_mariadb": _system("claim 100 per tx", 10000, 200, 20000),
        }
    }
    items = _items(results)
    single, bulk = items["mariadb_enqueue_single"], items["mariadb_enqueue_bulk"]
    assert single["ok"] is True  # 240 / 300 = 80%, although 400 / 200 apart
    assert single["measured"].startswith("side by side 240 / 300 jobs/s = 80%; in separate")
    assert bulk["ok"] is False  # the pairs' median, 40%, not 9,000 / 20,000 = 45%
    assert "= 40% (median of 1 pair(s))" in bulk["measured"]
    text = tables.engines_table(results)
    assert "| MariaDB | single enqueue side by side, jobs/s | 240 | 300 | 80% |" in text
    assert "| MariaDB | bulk enqueue side by side, jobs/s | 9,000 | 20,000 | 40% |" in text
