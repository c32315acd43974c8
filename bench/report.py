"""From one run's results to bench/results/MODE.{json,md,png}, and docs/benchmarks.md for a
full run (bench/page.py). `python -m bench.report FILE` rewrites them from a saved run;
bench/results/full.json is the last full run, quick.json the last quick one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from . import common, page, tables, targets
from .tables import fmt_num, get


def results_md(results: dict[str, Any]) -> str:
    return "\n\n".join([
        f"# Benchmark results ({results['mode']} run, {results['started']})",
        tables.machine_lines(results),
        "## Side by side\n\nEach cell: median (min-max) of the repetitions.\n\n"
        + tables.main_table(results),
        "## Targets (issues 6 and 53)\n\n" + targets.table(targets.evaluate(results)),
        "## MariaDB and SQLite beside their raw loops (issue 53)\n\n"
        + (tables.engines_table(results) or "(not in this run)"),
        "## Configuration scan (1 process, one drain each)\n\n" + tables.scan_table(results),
        "## Claim+ack cost against the table (us per job; x: against 10k pending)\n\n"
        + tables.scale_table(results),
        "## Admin (server time)\n\n" + tables.admin_lines(results),
        "## Errors\n\n" + tables.errors(results),
        "## Machine load around each system\n\n" + tables.load_lines(results),
    ]) + "\n"  # fmt: skip


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [r for r in tables.rows(results) if r["drain_1"] or r["p50"]]
    names = [
        r["title"].replace(", ", "\n")
        + (
            ""
            if r["name"].startswith("raw")
            else "\n" + r["config"].replace(", ", "\n").replace(" --", "\n--")
        )
        for r in data
    ]
    x = range(len(data))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))
    _bars(ax1, data, x, (("drain_1", "1 process"), ("drain_2", "2 processes")), 0)
    ax1.set_ylim(bottom=10, top=_top(data, ("drain_1", "drain_2")))
    ax1.set_ylabel("jobs/s (log scale)")
    ax1.set_title(f"Drain of {results['params']['n']:,} no-op jobs")
    ax1.set_xticks(list(x), names, fontsize=7)
    _bars(ax2, data, x, (("p50", "p50"), ("p95", "p95"), ("p99", "p99")), 1)
    ax2.set_ylim(bottom=0.5, top=_top(data, ("p99",)))
    ax2.set_ylabel("ms (log scale)")
    latency_jobs = results["params"].get("latency_jobs", 200)
    ax2.set_title(f"Pickup latency, idle worker, {latency_jobs} jobs 20 ms apart")
    ax2.set_xticks(list(x), names, fontsize=7)
    fig.suptitle(f"{results['mode']} run, {results['started']}, "
                 f"{results['machine']['nproc']} cores", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(ax: Any, data: list[dict[str, Any]], x: range, keys: tuple[tuple[str, str], ...],
          digits: int) -> None:  # fmt: skip
    """One bar per key and row, side by side around each tick, labelled with its value."""
    w = 0.76 / len(keys)
    for i, (key, label) in enumerate(keys):
        offset = (i - (len(keys) - 1) / 2) * w
        vals = [get(r, key, "median") or 0 for r in data]
        bars = ax.bar([j + offset for j in x], vals, w, label=label)
        ax.bar_label(bars, [fmt_num(v, digits) if v else "" for v in vals], fontsize=7,
                     rotation=90, padding=2)  # fmt: skip
    ax.set_yscale("log")
    ax.legend()


def _top(data: list[dict[str, Any]], keys: tuple[str, ...]) -> float:
    return max([get(r, k, "median") or 1 for r in data for k in keys]) * 4


def write(results: dict[str, Any], docs: bool) -> list[Path]:
    """The run's one copy of each result: MODE.json, MODE.md, MODE.png; and the docs page."""
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    stem = common.RESULTS / results["mode"]
    written = [stem.with_suffix(".json"), stem.with_suffix(".md"), stem.with_suffix(".png")]
    written[0].write_text(json.dumps(results, indent=1, default=str))
    written[1].write_text(results_md(results))
    chart(results, written[2])
    if docs:
        page.write(results)
        written.append(page.DOCS)
    return written


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else common.RESULTS / "full.json"
    results = json.loads(path.read_text())
    for p in write(results, docs=results["mode"] == "full"):
        print(f"wrote {p.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
