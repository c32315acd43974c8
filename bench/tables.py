"""The tables and lists of one run's results, in Markdown: read by bench/report.py (the
results page) and bench/page.py (docs/benchmarks.md). A cell is `median (min-max)` of the
repetitions; a dash where the run has no figure."""

from __future__ import annotations

from typing import Any


def fmt_num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def fmt(fig: dict[str, Any] | None, digits: int = 0) -> str:
    """`median (min-max)`, or the single value of a one-repetition run."""
    if not fig:
        return "-"
    if fig["n"] == 1 or fig["min"] == fig["max"]:
        return fmt_num(fig["median"], digits)
    return (f"{fmt_num(fig['median'], digits)} ({fmt_num(fig['min'], digits)}-"
            f"{fmt_num(fig['max'], digits)})")  # fmt: skip


def get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def median(fig: Any) -> float | None:
    return fig["median"] if isinstance(fig, dict) and "median" in fig else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def variant(results: dict[str, Any], system: str, prefix: str = "") -> dict[str, Any]:
    """The system's measured configuration whose label starts with `prefix` (raw has three)."""
    for v in get(results, "systems", system, "variants") or []:
        if v.get("config", "").startswith(prefix):
            return v  # type: ignore[no-any-return]
    return {}


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per system and measured configuration (raw has three)."""
    out = []
    for name, res in results["systems"].items():
        for variant in res.get("variants") or [{}]:
            title = res.get("title", name)
            config = variant.get("config", "-")
            if name.startswith("raw"):
                title = f"{title}, {config}"
            if variant.get("informational"):
                config += " (informational: no target reads it)"
            bulk = get(res, "enqueue_bulk")
            out.append({
                "name": name, "title": title, "config": config,
                "single": get(res, "enqueue_single", "jobs_per_s"),
                "bulk": get(bulk, "jobs_per_s"),
                "bulk_note": "no API" if bulk and not bulk.get("supported", True) else "",
                "bulk_insert": get(res, "enqueue_bulk_insert", "jobs_per_s"),
                "drain_1": get(variant, "drain_1", "jobs_per_s"),
                "drain_2": get(variant, "drain_2", "jobs_per_s"),
                "cpu": get(variant, "drain_1", "cpu_ms_per_job"),
                "rss": get(variant, "drain_1", "peak_rss_mb"),
                "p50": get(variant, "latency", "p50_ms"),
                "p95": get(variant, "latency", "p95_ms"),
                "p99": get(variant, "latency", "p99_ms"),
            })  # fmt: skip
    return out


def main_table(results: dict[str, Any]) -> str:
    head = ("| system | worker configuration | enqueue 1-by-1 /s | bulk enqueue /s | "
            "drain 1 proc /s | drain 2 procs /s | pickup p50 / p95 / p99 ms | "
            "worker peak RSS MB | worker CPU ms/job |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    lines = [head]
    for r in rows(results):
        bulk = r["bulk_note"] or fmt(r["bulk"])
        if r["bulk_insert"]:
            bulk = f"COPY {bulk}; multi-row INSERT {fmt(r['bulk_insert'])}"
        latency = " / ".join(fmt_num(get(r, k, "median"), 1) for k in ("p50", "p95", "p99"))
        lines.append(
            f"| {r['title']} | {r['config']} | {fmt(r['single'])} | {bulk} | {fmt(r['drain_1'])} "
            f"| {fmt(r['drain_2'])} | {latency} | {fmt(r['rss'], 1)} | {fmt(r['cpu'], 3)} |"
        )
    return "\n".join(lines)


def scan_table(results: dict[str, Any]) -> str:
    lines = ["| system | configuration | jobs | drain 1 proc /s | CPU ms/job | peak RSS MB |",
             "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for res in results["systems"].values():
        for r in res.get("scan") or []:
            note = " (informational: not eligible as best)" if r.get("informational") else ""
            lines.append(f"| {res['title']} | {r['config']}{note} | {r['n']:,} | "
                         f"{fmt_num(r['jobs_per_s'])} | {fmt_num(r['cpu_ms_per_job'], 3)} | "
                         f"{fmt_num(r['peak_rss_mb'], 1)} |")  # fmt: skip
    return "\n".join(lines) if len(lines) > 2 else "(no scan in this run)"


SCENARIOS = [
    ("pending_10000", "10k pending"),
    ("pending_100000", "100k pending"),
    ("pending_1000000", "1M pending"),
    ("pending_{big}", "{bign} pending"),  # a quick run's big table
    ("retained_results_{big}", "10k pending + {bign} retained task results"),
    ("dead_letters_{big}", "10k pending + {bign} dead letters"),
    ("after_{big}_acked_no_vacuum", "right after {bign} acked, no VACUUM (their leases running)"),
    ("after_{big}_acked_leases_lapsed", "the same, clock moved past the acked jobs' leases"),
    ("after_{big}_acked_then_vacuum", "the same after VACUUM"),
]


def scale_rows(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    ours = get(results, "systems", "alkqueue", "scale") or {}
    raw = get(results, "systems", "raw", "scale") or {}
    big = get(ours, "sizes", "big") or get(raw, "sizes", "big") or 1_000_000
    bign = "1M" if big == 1_000_000 else f"{big // 1000}k"
    out: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    for key, label in SCENARIOS:
        key, label = key.format(big=big), label.format(bign=bign)
        if (key in ours or key in raw) and key not in [row[0] for row in out]:
            out.append((key, label, ours.get(key) or {}, raw.get(key) or {}))
    return out


def scale_table(results: dict[str, Any]) -> str:
    lines = ["| table state | alkqueue claim 1 us/job | alkqueue claim 100 us/job | "
             "raw claim 1 us/job | raw claim 100 us/job |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    base = {}
    for key, label, ours, raw in scale_rows(results):
        cells = []
        for sysname, data in (("ours", ours), ("raw", raw)):
            for b in ("b1", "b100"):
                fig = get(data, b, "us_per_job")
                if not fig:
                    cells.append("-")
                    continue
                if key == "pending_10000":
                    base[(sysname, b)] = fig["median"]
                ratio = fig["median"] / base[(sysname, b)] if (sysname, b) in base else None
                extra = f" x{ratio:.2f}" if ratio and key != "pending_10000" else ""
                paired = get(data, b, "ratio", "median")
                if paired is not None:
                    extra += f"; side by side x{paired:.2f}"
                cells.append(f"{fmt(fig, 1)}{extra}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else "(not measured in this run)"


def admin_lines(results: dict[str, Any]) -> str:
    scale = get(results, "systems", "alkqueue", "scale") or {}
    big = get(scale, "sizes", "big") or 0
    lines = []
    for key, rows_label in (("admin_jobs", "jobs"), ("admin_dead_letters", "dead letters")):
        data = scale.get(key)
        if data is None:
            continue
        if not data.get("measured"):
            lines.append(f"- with {big:,} {rows_label}: {data.get('reason')}")
            continue
        for page, v in data["pages"].items():
            lines.append(f"- {page} (`{v['url']}`), {big:,} {rows_label}: {fmt(v['ms'], 1)} ms "
                         f"(HTTP {v['status']})")  # fmt: skip
    return "\n".join(lines) or "- not measured in this run"


def errors(results: dict[str, Any]) -> str:
    """Each step that failed (its first line) and each step retried after a server restart."""
    lines = []
    for res in results["systems"].values():
        title = res.get("title", res["system"])
        for step, err in (res.get("errors") or {}).items():
            first = err.strip().splitlines()[0] if err.strip() else err
            lines.append(f"- {title}, {step}: `{first[:300]}`")
        lines += [f"- retried after a server restart: {title}, {r[:200]}"
                  for r in res.get("retried") or []]  # fmt: skip
    return "\n".join(lines) or "- none"


def load_lines(results: dict[str, Any]) -> str:
    lines = []
    for res in results["systems"].values():
        for when in ("before", "after"):
            snap = get(res, "load", when)
            if not snap:
                continue
            busy = ", ".join(f"{b['cmd'][:50]} {b['cpu_pct']:.0f}%" for b in snap["busy"][:3])
            la = " ".join(f"{x:.2f}" for x in snap["loadavg"])
            lines.append(f"- {res.get('title', res['system'])} {when}: load {la}"
                         + (f"; busy: {busy}" if busy else ""))  # fmt: skip
    return "\n".join(lines)


def machine_lines(results: dict[str, Any]) -> str:
    m = results["machine"]
    pg = m["postgresql"]
    pkgs = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    versions: list[str] = []  # each once: the four Celery systems share their packages
    for res in results["systems"].values():
        versions += [f"{k} {v}" for k, v in (res.get("versions") or {}).items()
                     if f"{k} {v}" not in versions]  # fmt: skip
    return "\n".join([
        f"- {m['nproc']} cores ({m['cpu']}), {m['memory_gb']} GB memory, Linux {m['kernel']}",
        f"- PostgreSQL {pg['server_version']} on the same machine: fsync={pg['fsync']}, "
        f"synchronous_commit={pg['synchronous_commit']}, wal_sync_method="
        f"{pg['wal_sync_method']}, shared_buffers={pg['shared_buffers']}, "
        f"autovacuum={pg['autovacuum']}, max_connections={pg['max_connections']}",
        f"- Python {m['python']}; {pkgs}",
        f"- systems: {', '.join(versions)}",
        f"- run: {results['command']} ({results['mode']}: N = {results['params']['n']:,} per "
        f"drain and bulk enqueue, {results['params']['n_single']:,} single enqueues, "
        f"{results['params']['reps']} repetition(s)), {results['started']} to "
        f"{results['finished']}, {results['seconds'] / 60:.0f} min",
    ])  # fmt: skip


#: Issue 53: each engine with django-alkqueue on it and its raw loops (bench/targets.py reads
#: the same pairs).
ENGINE_PAIRS = (("MariaDB", "alkqueue_mariadb", "raw_mariadb"),
                ("SQLite", "alkqueue_sqlite", "raw_sqlite"))  # fmt: skip


def engines_table(results: dict[str, Any]) -> str:
    """django-alkqueue on MariaDB and on SQLite beside the engine's raw loops (claim 100 per
    transaction): the rates the targets read and where a drain's time goes (worker and
    server CPU per job). An engine whose systems the run lacks reads "not measured yet"."""
    lines = ["| engine | figure | django-alkqueue | raw loop | django-alkqueue / raw |",
             "|---|---|---:|---:|---:|"]  # fmt: skip
    missing = []
    for engine, ours_name, raw_name in ENGINE_PAIRS:
        systems = results.get("systems") or {}
        if ours_name not in systems and raw_name not in systems:
            missing.append(f"{engine}: not measured yet (this run has neither `{ours_name}` "
                           f"nor `{raw_name}`).")  # fmt: skip
            continue
        ours, raw = variant(results, ours_name), variant(results, raw_name, "claim 100 ")
        figures = [
            ("drain, 2 processes, jobs/s", get(ours, "drain_2", "jobs_per_s"),
             get(raw, "drain_2", "jobs_per_s"), 0),
            ("worker CPU per job, ms (drain, 2 processes)",
             get(ours, "drain_2", "cpu_ms_per_job"), get(raw, "drain_2", "cpu_ms_per_job"), 3),
            ("server CPU per job, ms (drain, 2 processes)",
             get(ours, "drain_2", "server_cpu_ms_per_job"),
             get(raw, "drain_2", "server_cpu_ms_per_job"), 3),
            ("server statements per job (drain, 2 processes)",
             get(ours, "drain_2", "server_statements_per_job"),
             get(raw, "drain_2", "server_statements_per_job"), 2),
            ("single enqueue, jobs/s", get(systems, ours_name, "enqueue_single", "jobs_per_s"),
             get(systems, raw_name, "enqueue_single", "jobs_per_s"), 0),
            ("bulk enqueue, jobs/s", get(systems, ours_name, "enqueue_bulk", "jobs_per_s"),
             get(systems, raw_name, "enqueue_bulk", "jobs_per_s"), 0),
            ("pickup p50, ms", get(ours, "latency", "p50_ms"), get(raw, "latency", "p50_ms"), 1),
            ("pickup p99, ms", get(ours, "latency", "p99_ms"), get(raw, "latency", "p99_ms"), 1),
        ]  # fmt: skip
        for what in ("single", "bulk"):  # the enqueues taking turns in one window
            side = get(systems, ours_name, "side_by_side", what)
            if side:
                paired = median(side["ratio"]) if what == "bulk" else None
                figures.append((f"{what} enqueue side by side, jobs/s",
                                side["jobs_per_s"]["alkqueue"], side["jobs_per_s"]["raw"], 0,
                                paired))  # fmt: skip
        if engine == "SQLite":  # no server: the workers' CPU is all of it
            figures = [f for f in figures if not f[0].startswith("server ")]
        for label, a, b, digits, *paired in figures:
            share = paired[0] if paired and paired[0] is not None else ratio(median(a), median(b))
            cell = "-" if share is None else f"{share:.0%}"
            lines.append(f"| {engine} | {label} | {fmt(a, digits)} | {fmt(b, digits)} | {cell} |")
    table = "\n".join(lines) if len(lines) > 2 else ""
    return "\n\n".join(part for part in (table, " ".join(missing)) if part)
