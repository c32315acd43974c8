"""From one run's JSON to bench/results/latest.{json,md,png} and docs/benchmarks.md.

Every number written here comes from the results dict; `python -m bench.report FILE`
rewrites the outputs from a saved run (bench/results/full.json is the last full run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from . import common, targets

DOCS = common.ROOT / "docs" / "benchmarks.md"


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


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per system and measured configuration (raw has three)."""
    out = []
    for name, res in results["systems"].items():
        for variant in res.get("variants") or [{}]:
            title = res.get("title", name)
            config = variant.get("config", "-")
            if name == "raw":
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


def latency_table(results: dict[str, Any]) -> str:
    lines = ["| system | p50 ms | p95 ms | p99 ms |", "|---|---:|---:|---:|"]
    for r in rows(results):
        lines.append(f"| {r['title']} | {fmt(r['p50'], 1)} | {fmt(r['p95'], 1)} | "
                     f"{fmt(r['p99'], 1)} |")  # fmt: skip
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
    out = []
    for key, label in SCENARIOS:
        key, label = key.format(big=big), label.format(bign=bign)
        if key in ours or key in raw:
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


def breakdown_table(results: dict[str, Any]) -> str:
    data = get(results, "systems", "alkqueue", "enqueue_breakdown")
    if not data:
        return "(not measured in this run)"
    lines = [f"{data['n']:,} single-row enqueues per layer and repetition, one transaction each, "
             f"the layers taking turns every {data.get('chunk', 1)} calls.", "",
             "| layer | jobs/s | vs the first layer | us per call | over the first layer |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    base = None
    for label, fig in data["layers"].items():
        base = base or fig["median"]
        call_us = 1e6 / fig["median"]
        lines.append(f"| {label} | {fmt(fig)} | {fig['median'] / base:.0%} | {call_us:,.1f} | "
                     f"{call_us - 1e6 / base:+,.1f} |")  # fmt: skip
    return "\n".join(lines)


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
    lines = []
    for res in results["systems"].values():
        for step, err in (res.get("errors") or {}).items():
            first = err.strip().splitlines()[0] if err.strip() else err
            lines.append(f"- {res.get('title', res['system'])}, {step}: `{first[:300]}`")
    return "\n".join(lines) or "- none"


def profile_lines(results: dict[str, Any], top: int = 12) -> str:
    from .profiling import package

    prof = get(results, "systems", "alkqueue", "profile")
    if not prof:
        return "(no profile in this run)"
    run = prof["drain_under_profiler"]
    covered = sum(p["pct"] for p in prof["self"])
    packages: dict[str, float] = {}
    for p in prof["self"]:
        owner = package(p["name"])
        packages[owner] = packages.get(owner, 0.0) + p["pct"]
    out = [f"py-spy {prof['rate_hz']} Hz, non-blocking, `--gil`, on the worker process (1 "
           f"process, {prof['config']}) draining {run['n']:,} jobs at "
           f"{fmt_num(run['jobs_per_s'])} jobs/s under the profiler; {prof['samples']:,} samples "
           "of whichever thread held the GIL, so the shares are of the worker's Python time "
           "(waits on the socket or a lock, with the GIL released, are not sampled).",
           "", f"By package of the running (leaf) frame, over the {len(prof['self'])} functions "
           f"with the most self time ({covered:.0f}% of the samples):", "",
           "| package | share of samples |", "|---|---:|"]  # fmt: skip
    out += [f"| {k} | {v:.1f}% |" for k, v in sorted(packages.items(), key=lambda kv: -kv[1])]
    out += ["", "| function (self time) | share |", "|---|---:|"]
    out += [f"| `{p['name']}` | {p['pct']:.1f}% |" for p in prof["self"][:top]]
    mine = [p for p in prof["inclusive"] if "django_alkqueue/" in p["name"]
            and "alk_worker.py" not in p["name"]]  # fmt: skip
    if mine:
        out += ["", "| django_alkqueue function (inclusive: on the stack) | share |", "|---|---:|"]
        out += [f"| `{p['name']}` | {p['pct']:.1f}% |" for p in mine[:top]]
    return "\n".join(out)


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
    versions = []
    for res in results["systems"].values():
        versions += [f"{k} {v}" for k, v in (res.get("versions") or {}).items()]
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


def results_md(results: dict[str, Any]) -> str:
    t = targets.evaluate(results)
    return "\n\n".join([
        f"# Benchmark results ({results['mode']} run, {results['started']})",
        machine_lines(results),
        "## Side by side\n\nEach cell: median (min-max) of the repetitions.\n\n"
        + main_table(results),
        "## Targets (issue 6)\n\n" + targets.table(t),
        "## Configuration scan (1 process, one drain each)\n\n" + scan_table(results),
        "## Claim+ack cost against the table (us per job; x: against 10k pending)\n\n"
        + scale_table(results),
        "## Single enqueue, layer by layer (django-alkqueue)\n\n" + breakdown_table(results),
        "## Admin (server time)\n\n" + admin_lines(results),
        "## Profile of the worker\n\n" + profile_lines(results),
        "## Errors\n\n" + errors(results),
        "## Machine load around each system\n\n" + load_lines(results),
    ]) + "\n"  # fmt: skip


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [r for r in rows(results) if r["drain_1"] or r["p50"]]
    names = [
        r["title"].replace(", ", "\n")
        + (
            ""
            if r["name"] == "raw"
            else "\n" + r["config"].replace(", ", "\n").replace(" --", "\n--")
        )
        for r in data
    ]
    x = range(len(data))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))
    w = 0.38
    for offset, key, label in ((-w / 2, "drain_1", "1 process"), (w / 2, "drain_2", "2 processes")):
        vals = [get(r, key, "median") or 0 for r in data]
        bars = ax1.bar([i + offset for i in x], vals, w, label=label)
        ax1.bar_label(bars, [fmt_num(v) if v else "" for v in vals], fontsize=7, rotation=90,
                      padding=2)  # fmt: skip
    ax1.set_yscale("log")
    ax1.set_ylim(bottom=10, top=max([get(r, k, "median") or 1 for r in data
                                     for k in ("drain_1", "drain_2")]) * 4)  # fmt: skip
    ax1.set_ylabel("jobs/s (log scale)")
    ax1.set_title(f"Drain of {results['params']['n']:,} no-op jobs")
    ax1.set_xticks(list(x), names, fontsize=7)
    ax1.legend()
    w = 0.27
    for offset, key in ((-w, "p50"), (0, "p95"), (w, "p99")):
        vals = [get(r, key, "median") or 0 for r in data]
        bars = ax2.bar([i + offset for i in x], vals, w, label=key)
        ax2.bar_label(bars, [fmt_num(v, 1) if v else "" for v in vals], fontsize=7, rotation=90,
                      padding=2)  # fmt: skip
    ax2.set_yscale("log")
    ax2.set_ylim(bottom=0.5, top=max([get(r, k, "median") or 1 for r in data
                                      for k in ("p99",)]) * 4)  # fmt: skip
    ax2.set_ylabel("ms (log scale)")
    ax2.set_title("Pickup latency, idle worker, 200 jobs 20 ms apart")
    ax2.set_xticks(list(x), names, fontsize=7)
    ax2.legend()
    fig.suptitle(f"{results['mode']} run, {results['started']}, "
                 f"{results['machine']['nproc']} cores", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: dict[str, Any], docs: bool) -> list[Path]:
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    mode = results["mode"]
    written = []
    for stem in ("latest", mode):
        js = common.RESULTS / f"{stem}.json"
        js.write_text(json.dumps(results, indent=1, default=str))
        md = common.RESULTS / f"{stem}.md"
        md.write_text(results_md(results))
        png = common.RESULTS / f"{stem}.png"
        chart(results, png)
        written += [js, md, png]
    if docs:
        from .docs import benchmarks_md

        DOCS.write_text(benchmarks_md(results))
        written.append(DOCS)
    return written


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else common.RESULTS / "full.json"
    results = json.loads(path.read_text())
    for p in write(results, docs=results["mode"] == "full"):
        print(f"wrote {p.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
