"""The targets of issue 6, read as ratios within one run, and whether this run meets them."""

from __future__ import annotations

from typing import Any

PEERS = ("django_tasks_db", "procrastinate", "vtasks")


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _variant(results: dict[str, Any], system: str, config_prefix: str = "") -> dict[str, Any]:
    for v in _get(results, "systems", system, "variants") or []:
        if v.get("config", "").startswith(config_prefix):
            return v  # type: ignore[no-any-return]
    return {}


def _median(fig: Any) -> float | None:
    return fig["median"] if isinstance(fig, dict) and "median" in fig else None


def _item(key: str, target: str, measured: str, ok: bool | None, **data: Any) -> dict[str, Any]:
    return {"key": key, "target": target, "measured": measured, "ok": ok, **data}


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    ours = _variant(results, "alkqueue")
    raw100 = _variant(results, "raw", "claim 100 per tx")
    out = []

    d2 = _median(_get(ours, "drain_2", "jobs_per_s"))
    r2 = _median(_get(raw100, "drain_2", "jobs_per_s"))
    peers = {p: _median(_get(_variant(results, p), "drain_2", "jobs_per_s")) for p in PEERS}
    peers = {p: v for p, v in peers.items() if v}
    best_peer = max(peers.items(), key=lambda kv: kv[1]) if peers else None
    out.append(
        _item(
            "drain_abs",
            "drain, 2 processes >= 10,000 jobs/s",
            _n(d2) + " jobs/s",
            _ge(d2, 10_000),
            value=d2,
            ratio=_ratio(d2, 10_000),
        )
    )
    out.append(
        _item(
            "drain_raw",
            "drain, 2 processes >= 50% of raw claim-100 (2 processes)",
            f"{_n(d2)} / {_n(r2)} = {_pct(d2, r2)}",
            _ge(_ratio(d2, r2), 0.5),
            ratio=_ratio(d2, r2),
        )
    )
    if best_peer:
        title = _get(results, "systems", best_peer[0], "title")
        out.append(
            _item(
                "drain_peers",
                "drain, 2 processes >= 10x the fastest peer",
                f"{_n(d2)} / {_n(best_peer[1])} ({title}) = {_x(d2, best_peer[1])}",
                _ge(_ratio(d2, best_peer[1]), 10),
                ratio=_ratio(d2, best_peer[1]),
            )
        )
    out.append(_bulk_item(results))
    out.append(_single_item(results))
    p50 = _median(_get(ours, "latency", "p50_ms"))
    p99 = _median(_get(ours, "latency", "p99_ms"))
    out.append(_item("p50", "pickup p50 <= 5 ms", _ms(p50), _le(p50, 5), ratio=_ratio(p50, 5)))
    out.append(_item("p99", "pickup p99 <= 25 ms", _ms(p99), _le(p99, 25), ratio=_ratio(p99, 25)))
    out += _scale_items(results)
    cpu = _median(_get(ours, "drain_1", "cpu_ms_per_job"))
    out.append(
        _item(
            "cpu",
            "worker CPU per no-op job <= 0.1 ms",
            _ms(cpu, 3),
            _le(cpu, 0.1),
            ratio=_ratio(cpu, 0.1),
        )
    )
    out.append(_rss_item(results, ours))
    out += _admin_items(results)
    return out


def _rss_item(results: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The target names concurrency 4. When the configuration the figures use has fewer
    threads, the largest peak RSS of the scan's concurrency-4 drains stands in (one drain
    each, 1 process)."""
    config = ours.get("config", "")
    rss = _median(_get(ours, "drain_1", "peak_rss_mb"))
    where = ""
    if not config.startswith("--concurrency 4 "):
        scanned = [r for r in _get(results, "systems", "alkqueue", "scan") or []
                   if r.get("config", "").startswith("--concurrency 4 ")
                   and r.get("peak_rss_mb")]  # fmt: skip
        top = max(scanned, key=lambda r: r["peak_rss_mb"], default=None)
        rss = top["peak_rss_mb"] if top else None
        where = f" (the scan's largest at concurrency 4: {top['config']})" if top else ""
    return _item(
        "rss",
        "worker RSS <= 80 MB (concurrency 4)",
        (f"{rss:.1f} MB" if rss else "-") + where,
        _le(rss, 80),
        ratio=_ratio(rss, 80),
    )


def _bulk_item(results: dict[str, Any]) -> dict[str, Any]:
    """Read side by side where the run has it: the median of the per-pair ratios to the raw
    COPY. The suite's own figures, taken minutes apart, are shown beside it."""
    bulk = _median(_get(results, "systems", "alkqueue", "enqueue_bulk", "jobs_per_s"))
    raw_bulk = max(filter(None, [
        _median(_get(results, "systems", "raw", "enqueue_bulk", "jobs_per_s")),
        _median(_get(results, "systems", "raw", "enqueue_bulk_insert", "jobs_per_s")),
    ]), default=None)  # fmt: skip
    apart = f"{_n(bulk)} / {_n(raw_bulk)} = {_pct(bulk, raw_bulk)}"
    side = _get(results, "systems", "alkqueue", "side_by_side", "bulk")
    target = "bulk enqueue >= 50% of raw (best of COPY, multi-row INSERT)"
    if not side:
        return _item("bulk", target, apart, _ge(_ratio(bulk, raw_bulk), 0.5),
                     ratio=_ratio(bulk, raw_bulk))  # fmt: skip
    ratio = side["ratio"]["median"]
    ours, raw = _median(side["jobs_per_s"]["alkqueue"]), _median(side["jobs_per_s"]["raw"])
    pairs = f"{side['ratio']['n']} pair" + ("s" if side["ratio"]["n"] != 1 else "")
    measured = (f"side by side {_n(ours)} / {_n(raw)} COPY, {ratio:.0%} (median of "
                f"{pairs}); in separate windows {apart}")  # fmt: skip
    return _item("bulk", target, measured, _ge(ratio, 0.5), ratio=ratio)


def _single_item(results: dict[str, Any]) -> dict[str, Any]:
    """Read side by side where the run has it: the median rates of the turns, one over the
    other. The suite's own figures, taken minutes apart, are shown beside it."""
    one = _median(_get(results, "systems", "alkqueue", "enqueue_single", "jobs_per_s"))
    raw_one = _median(_get(results, "systems", "raw", "enqueue_single", "jobs_per_s"))
    apart = f"{_n(one)} / {_n(raw_one)} = {_pct(one, raw_one)}"
    side = _get(results, "systems", "alkqueue", "side_by_side", "single")
    target = "single enqueue >= 80% of raw one INSERT per call"
    if not side:
        return _item("single", target, apart, _ge(_ratio(one, raw_one), 0.8),
                     ratio=_ratio(one, raw_one))  # fmt: skip
    ours, raw = _median(side["jobs_per_s"]["alkqueue"]), _median(side["jobs_per_s"]["raw"])
    measured = (f"side by side {_n(ours)} / {_n(raw)} = {_pct(ours, raw)}; in separate "
                f"windows {apart}")  # fmt: skip
    return _item("single", target, measured, _ge(_ratio(ours, raw), 0.8), ratio=_ratio(ours, raw))


def _scale_items(results: dict[str, Any]) -> list[dict[str, Any]]:
    scale = _get(results, "systems", "alkqueue", "scale") or {}
    big = _get(scale, "sizes", "big")
    if not scale or not big:
        return []
    bign = "1M" if big == 1_000_000 else f"{big:,} (quick run)"
    checks = [
        (f"pending_{big}", f"claim+ack with {bign} pending within 1.5x of 10k", 1.5),
        (f"retained_results_{big}", f"claim+ack with {bign} retained results within 1.2x", 1.2),
        (f"dead_letters_{big}", f"claim+ack with {bign} dead letters within 1.2x", 1.2),
        (f"after_{big}_acked_no_vacuum", f"claim+ack right after {bign} acked (no VACUUM) "
         "within 3x", 3.0),
        (f"after_{big}_acked_leases_lapsed", f"claim+ack right after {bign} acked (no VACUUM), "
         "their leases lapsed, within 3x", 3.0),
    ]  # fmt: skip
    out = []
    for key, target, limit in checks:
        if key not in scale:
            continue
        for b, label in (("b1", "claim 1"), ("b100", "claim 100")):
            base = _median(_get(scale, "pending_10000", b, "us_per_job"))
            val = _median(_get(scale, key, b, "us_per_job"))
            apart = _ratio(val, base)
            measured = f"{_n(val, 1)} / {_n(base, 1)} us per job = x{apart:.2f}" if apart else "-"
            paired = _median(_get(scale, key, b, "ratio"))
            if paired is not None and apart is not None:
                beside = _median(_get(scale, key, b, "baseline_us_per_job"))
                measured = (f"side by side {_n(val, 1)} / {_n(beside, 1)} us per job = "
                            f"x{paired:.2f} (median of the repetitions' ratios); against the "
                            f"10k-pending row {measured}")  # fmt: skip
            r = scale_ratio(scale, key, b)
            out.append(_item(f"scale_{key}_{b}", f"{target} ({label})", measured,
                             _le(r, limit), ratio=r, limit=limit))  # fmt: skip
    return out


def scale_ratio(scale: dict[str, Any], key: str, b: str) -> float | None:
    """The ratio a claim+ack target reads for row `key` at batch `b`: side by side with the
    baseline where the run has it (bench/scale.py), else to the 10k-pending row."""
    paired = _median(_get(scale, key, b, "ratio"))
    if paired is not None:
        return paired
    return _ratio(
        _median(_get(scale, key, b, "us_per_job")),
        _median(_get(scale, "pending_10000", b, "us_per_job")),
    )


def _admin_items(results: dict[str, Any]) -> list[dict[str, Any]]:
    scale = _get(results, "systems", "alkqueue", "scale") or {}
    out = []
    for key in ("admin_jobs", "admin_dead_letters"):
        data = scale.get(key)
        if data is None:
            continue
        if not data.get("measured"):
            if key == "admin_jobs":
                out.append(
                    _item(
                        "admin",
                        "admin changelist and overview < 300 ms with 1M rows",
                        data.get("reason", "not measured"),
                        None,
                    )
                )
            continue
        for page, v in data["pages"].items():
            ms = _median(v["ms"])
            ok = _le(ms, 300) if v["status"] == 200 else None if v["status"] == 404 else False
            out.append(
                _item(
                    f"admin_{page}",
                    f"admin {page} < 300 ms",
                    f"{_ms(ms)} (HTTP {v['status']})",
                    ok,
                    ratio=_ratio(ms, 300),
                )
            )
    if not out:
        out.append(
            _item(
                "admin",
                "admin changelist and overview < 300 ms with 1M rows",
                "not measured in this run",
                None,
            )
        )
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _ge(a: float | None, b: float) -> bool | None:
    return None if a is None else a >= b


def _le(a: float | None, b: float) -> bool | None:
    return None if a is None else a <= b


def _n(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _ms(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f} ms"


def _pct(a: float | None, b: float | None) -> str:
    r = _ratio(a, b)
    return "-" if r is None else f"{r:.0%}"


def _x(a: float | None, b: float | None) -> str:
    r = _ratio(a, b)
    return "-" if r is None else f"{r:.1f}x"


def table(items: list[dict[str, Any]]) -> str:
    mark = {True: "met", False: "**missed**", None: "not measured"}
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {i['target']} | {i['measured']} | {mark[i['ok']]} |" for i in items]
    return "\n".join(lines)
