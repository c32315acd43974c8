"""The targets of issue 6 (and issue 53's for MariaDB and SQLite), read as ratios within one
run, and whether this run meets them. Each item: key, target, measured (the figures it reads,
as text) and ok (None: not measured).
"""

from __future__ import annotations

from typing import Any

from .tables import get, median, ratio, variant

PEERS = ("django_tasks_db", "procrastinate", "vtasks")
Item = dict[str, Any]


def _item(key: str, target: str, measured: str, ok: bool | None) -> Item:
    return {"key": key, "target": target, "measured": measured, "ok": ok}


def evaluate(results: dict[str, Any]) -> list[Item]:
    ours = variant(results, "alkqueue")
    d2 = median(get(ours, "drain_2", "jobs_per_s"))
    r2 = median(get(variant(results, "raw", "claim 100 per tx"), "drain_2", "jobs_per_s"))
    out = [
        _item("drain_abs", "drain, 2 processes >= 10,000 jobs/s", _n(d2) + " jobs/s",
              _ge(d2, 10_000)),
        _item("drain_raw", "drain, 2 processes >= 50% of raw claim-100 (2 processes)",
              f"{_n(d2)} / {_n(r2)} = {_pct(d2, r2)}", _ge(ratio(d2, r2), 0.5)),
    ]  # fmt: skip
    peers = [(median(get(variant(results, p), "drain_2", "jobs_per_s")), p) for p in PEERS]
    if best := max(((rate, p) for rate, p in peers if rate), default=None):
        title = get(results, "systems", best[1], "title")
        out.append(_item("drain_peers", "drain, 2 processes >= 10x the fastest peer",
                         f"{_n(d2)} / {_n(best[0])} ({title}) = {_x(d2, best[0])}",
                         _ge(ratio(d2, best[0]), 10)))  # fmt: skip
    out += [_bulk_item(results), _single_item(results)]
    p50 = median(get(ours, "latency", "p50_ms"))
    p99 = median(get(ours, "latency", "p99_ms"))
    out.append(_item("p50", "pickup p50 <= 5 ms", _ms(p50), _le(p50, 5)))
    out.append(_item("p99", "pickup p99 <= 25 ms", _ms(p99), _le(p99, 25)))
    out += _scale_items(results)
    cpu = median(get(ours, "drain_1", "cpu_ms_per_job"))
    out.append(_item("cpu", "worker CPU per no-op job <= 0.1 ms", _ms(cpu, 3), _le(cpu, 0.1)))
    out.append(_rss_item(results, ours))
    return out + _admin_items(results) + engine_items(results)


def _rss_item(results: dict[str, Any], ours: dict[str, Any]) -> Item:
    """The target names concurrency 4. When the configuration the figures use has fewer
    threads, the largest peak RSS of the scan's concurrency-4 drains stands in (one drain
    each, 1 process)."""
    rss = median(get(ours, "drain_1", "peak_rss_mb"))
    where = ""
    if not ours.get("config", "").startswith("--concurrency 4 "):
        scan = get(results, "systems", "alkqueue", "scan") or []
        scanned = [r for r in scan if r["config"].startswith("--concurrency 4 ")]
        top = max(scanned, key=lambda r: r.get("peak_rss_mb") or 0, default=None)
        rss = top["peak_rss_mb"] if top else None
        where = f" (the scan's largest at concurrency 4: {top['config']})" if top else ""
    measured = (f"{rss:.1f} MB" if rss else "-") + where
    return _item("rss", "worker RSS <= 80 MB (concurrency 4)", measured, _le(rss, 80))


def _bulk_item(results: dict[str, Any]) -> Item:
    """Read side by side where the run has it: the median of the per-pair ratios to the raw
    COPY. The suite's own figures, taken minutes apart, are shown beside it."""
    bulk = median(get(results, "systems", "alkqueue", "enqueue_bulk", "jobs_per_s"))
    raw_bulk = max(filter(None, [
        median(get(results, "systems", "raw", "enqueue_bulk", "jobs_per_s")),
        median(get(results, "systems", "raw", "enqueue_bulk_insert", "jobs_per_s")),
    ]), default=None)  # fmt: skip
    apart = f"{_n(bulk)} / {_n(raw_bulk)} = {_pct(bulk, raw_bulk)}"
    side = get(results, "systems", "alkqueue", "side_by_side", "bulk")
    target = "bulk enqueue >= 50% of raw (best of COPY, multi-row INSERT)"
    if not side:
        return _item("bulk", target, apart, _ge(ratio(bulk, raw_bulk), 0.5))
    paired, pairs = side["ratio"]["median"], side["ratio"]["n"]
    ours, raw = median(side["jobs_per_s"]["alkqueue"]), median(side["jobs_per_s"]["raw"])
    measured = (f"side by side {_n(ours)} / {_n(raw)} COPY, {paired:.0%} (median of {pairs} "
                f"pair{'s' if pairs != 1 else ''}); in separate windows {apart}")  # fmt: skip
    return _item("bulk", target, measured, _ge(paired, 0.5))


def _single_item(results: dict[str, Any]) -> Item:
    """Read side by side where the run has it: the median rates of the turns, one over the
    other. The suite's own figures, taken minutes apart, are shown beside it."""
    one = median(get(results, "systems", "alkqueue", "enqueue_single", "jobs_per_s"))
    raw_one = median(get(results, "systems", "raw", "enqueue_single", "jobs_per_s"))
    apart = f"{_n(one)} / {_n(raw_one)} = {_pct(one, raw_one)}"
    side = get(results, "systems", "alkqueue", "side_by_side", "single")
    target = "single enqueue >= 80% of raw one INSERT per call"
    if not side:
        return _item("single", target, apart, _ge(ratio(one, raw_one), 0.8))
    ours, raw = median(side["jobs_per_s"]["alkqueue"]), median(side["jobs_per_s"]["raw"])
    measured = (
        f"side by side {_n(ours)} / {_n(raw)} = {_pct(ours, raw)}; in separate windows {apart}"
    )
    return _item("single", target, measured, _ge(ratio(ours, raw), 0.8))


def _scale_items(results: dict[str, Any]) -> list[Item]:
    scale = get(results, "systems", "alkqueue", "scale") or {}
    big = get(scale, "sizes", "big")
    if not big:
        return []
    bign = "1M" if big == 1_000_000 else f"{big:,} (quick run)"
    checks = [
        (f"pending_{big}", f"claim+ack with {bign} pending within 1.5x of 10k", 1.5),
        (f"retained_results_{big}", f"claim+ack with {bign} retained results within 1.2x", 1.2),
        (f"dead_letters_{big}", f"claim+ack with {bign} dead letters within 1.2x", 1.2),
    ]  # fmt: skip
    out = []
    for key, target, limit in [c for c in checks if c[0] in scale]:
        for b, label in (("b1", "claim 1"), ("b100", "claim 100")):
            base = median(get(scale, "pending_10000", b, "us_per_job"))
            val = median(get(scale, key, b, "us_per_job"))
            apart = ratio(val, base)
            measured = f"{_n(val, 1)} / {_n(base, 1)} us per job = x{apart:.2f}" if apart else "-"
            paired = median(get(scale, key, b, "ratio"))
            if paired is not None and apart is not None:
                beside = median(get(scale, key, b, "baseline_us_per_job"))
                measured = (f"side by side {_n(val, 1)} / {_n(beside, 1)} us per job = "
                            f"x{paired:.2f} (median of the repetitions' ratios); against the "
                            f"10k-pending row {measured}")  # fmt: skip
            out.append(_item(f"scale_{key}_{b}", f"{target} ({label})", measured,
                             _le(scale_ratio(scale, key, b), limit)))  # fmt: skip
    return out + _after_acks_items(results, scale, big, bign)


#: Right after a burst of acks, the claim reads the dead index entries the burst left: that is
#: PostgreSQL's cost before a VACUUM, and the raw loop pays it too (issue 53). So the target is
#: our ratio over the raw loop's ratio in the same state, with the leader's VACUUM beside it.
AFTER_ACKS_WITHIN_RAW = 1.15


def _after_acks_items(
    results: dict[str, Any], scale: dict[str, Any], big: int, bign: str
) -> list[Item]:
    raw = get(results, "systems", "raw", "scale") or {}
    rows = (
        (f"after_{big}_acked_no_vacuum", f"claim+ack right after {bign} acked (no VACUUM)"),
        (f"after_{big}_acked_leases_lapsed",
         f"claim+ack right after {bign} acked (no VACUUM), their leases lapsed"),
    )  # fmt: skip
    vacuumed = f"after_{big}_acked_then_vacuum"
    out = []
    for key, what in [row for row in rows if row[0] in scale]:
        for b, label in (("b1", "claim 1"), ("b100", "claim 100")):
            ours = scale_ratio(scale, key, b)
            theirs = scale_ratio(raw, f"after_{big}_acked_no_vacuum", b) if raw else None
            within = ratio(ours, theirs)
            measured = (f"ours x{_n(ours, 2)}, the raw loop's x{_n(theirs, 2)} in the same "
                        f"state = {_n(within, 2)}x")  # fmt: skip
            if vacuumed in scale:
                measured += f"; after the leader's VACUUM x{_n(scale_ratio(scale, vacuumed, b), 2)}"
            target = f"{what} within {AFTER_ACKS_WITHIN_RAW}x of the raw loop's ratio ({label})"
            out.append(_item(f"scale_{key}_{b}", target, measured,
                             _le(within, AFTER_ACKS_WITHIN_RAW)))  # fmt: skip
    return out


def scale_ratio(scale: dict[str, Any], key: str, b: str) -> float | None:
    """The ratio a claim+ack target reads for row `key` at batch `b`: side by side with the
    baseline where the run has it (bench/scale.py), else to the 10k-pending row."""
    paired = median(get(scale, key, b, "ratio"))
    if paired is not None:
        return paired
    return ratio(median(get(scale, key, b, "us_per_job")),
                 median(get(scale, "pending_10000", b, "us_per_job")))  # fmt: skip


def _admin_items(results: dict[str, Any]) -> list[Item]:
    scale = get(results, "systems", "alkqueue", "scale") or {}
    out = []
    for key in ("admin_jobs", "admin_dead_letters"):
        data = scale.get(key) or {}
        for page, v in (data.get("pages") or {}).items():
            ms = median(v["ms"])
            ok = _le(ms, 300) if v["status"] == 200 else None if v["status"] == 404 else False
            out.append(_item(f"admin_{page}", f"admin {page} < 300 ms",
                             f"{_ms(ms)} (HTTP {v['status']})", ok))  # fmt: skip
    reason = get(scale, "admin_jobs", "reason") or "not measured in this run"
    return out or [_item("admin", "admin changelist and overview < 300 ms with 1M rows", reason,
                         None)]  # fmt: skip


#: Issue 53: django-alkqueue on MariaDB and on SQLite beside each engine's own raw loops, in
#: the same run: (engine, our system, the raw system).
ENGINES = (("MariaDB", "alkqueue_mariadb", "raw_mariadb"),
           ("SQLite", "alkqueue_sqlite", "raw_sqlite"))  # fmt: skip
ENGINE_DRAIN_RAW = 0.70
ENGINE_SINGLE_RAW = 0.70
ENGINE_BULK_RAW = 0.50
#: Issue 53's pick-up without NOTIFY, an idle worker's start of a job enqueued on its host.
ENGINE_PICKUP_P50_MS = 50
ENGINE_PICKUP_P99_MS = 200


def engine_items(results: dict[str, Any]) -> list[Item]:
    """Each engine's targets against its raw loops: the 2-process drain against raw claim-100,
    the single and bulk enqueues against the raw INSERTs, and the pickup latency. A target
    whose systems did not run reads "not measured"."""
    out = []
    for engine, ours_name, raw_name in ENGINES:
        ours, raw = variant(results, ours_name), variant(results, raw_name, "claim 100 ")
        key = engine.lower()
        d2, r2 = (median(get(v, "drain_2", "jobs_per_s")) for v in (ours, raw))
        out.append(_item(f"{key}_drain_raw",
                         f"{engine}: drain, 2 processes >= {ENGINE_DRAIN_RAW:.0%} of raw "
                         "claim-100 (2 processes)", _share(d2, r2),
                         _ge(ratio(d2, r2), ENGINE_DRAIN_RAW)))  # fmt: skip
        for what, call, wanted, raw_call, side_key in (
            ("single enqueue", "enqueue_single", ENGINE_SINGLE_RAW, "one INSERT per call",
             "single"),
            ("bulk enqueue", "enqueue_bulk", ENGINE_BULK_RAW, "multi-row INSERT", "bulk"),
        ):  # fmt: skip
            a, b = (median(get(results, "systems", name, call, "jobs_per_s"))
                    for name in (ours_name, raw_name))  # fmt: skip
            measured, share = _share(a, b), ratio(a, b)
            side = get(results, "systems", ours_name, "side_by_side", side_key)
            if side:  # read side by side, as on PostgreSQL: the separate windows beside it
                share, measured = _side_share(side, side_key == "bulk", measured)
            out.append(_item(f"{key}_{call}", f"{engine}: {what} >= {wanted:.0%} of raw "
                             f"{raw_call}", measured, _ge(share, wanted)))  # fmt: skip
        p50, p99 = (median(get(ours, "latency", k)) for k in ("p50_ms", "p99_ms"))
        ok = None if p50 is None or p99 is None else (
            p50 <= ENGINE_PICKUP_P50_MS and p99 <= ENGINE_PICKUP_P99_MS)  # fmt: skip
        out.append(_item(f"{key}_pickup", f"{engine}: pickup p50 <= {ENGINE_PICKUP_P50_MS} ms, "
                         f"p99 <= {ENGINE_PICKUP_P99_MS} ms (idle worker, same host)",
                         f"{_ms(p50)} / {_ms(p99)}", ok))  # fmt: skip
    return out


def _side_share(side: dict[str, Any], paired: bool, apart: str) -> tuple[float | None, str]:
    """The side-by-side reading (bench/measure.py `side_by_side`): single, the ratio of the
    median rates; bulk, the median of the pairs' ratios, as issue 6's targets read them."""
    ours, raw = median(side["jobs_per_s"]["alkqueue"]), median(side["jobs_per_s"]["raw"])
    share = median(side["ratio"]) if paired else ratio(ours, raw)
    how = f" (median of {side['ratio']['n']} pair(s))" if paired else ""
    text = (f"side by side {_n(ours)} / {_n(raw)} jobs/s = {_pct(share, 1.0)}{how}; "
            f"in separate windows {apart}")  # fmt: skip
    return share, text


def _share(a: float | None, b: float | None) -> str:
    """`a / b = a/b%` in jobs/s, or "not measured" when either system did not run."""
    if a is None or b is None:
        return "not measured"
    return f"{_n(a)} / {_n(b)} jobs/s = {_pct(a, b)}"


def _ge(a: float | None, b: float) -> bool | None:
    return None if a is None else a >= b


def _le(a: float | None, b: float) -> bool | None:
    return None if a is None else a <= b


def _n(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _ms(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f} ms"


def _pct(a: float | None, b: float | None) -> str:
    r = ratio(a, b)
    return "-" if r is None else f"{r:.0%}"


def _x(a: float | None, b: float | None) -> str:
    r = ratio(a, b)
    return "-" if r is None else f"{r:.1f}x"


def table(items: list[Item]) -> str:
    mark = {True: "met", False: "**missed**", None: "not measured"}
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {i['target']} | {i['measured']} | {mark[i['ok']]} |" for i in items]
    return "\n".join(lines)
