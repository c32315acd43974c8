"""docs/benchmarks.md: bench/benchmarks.md.tmpl with its placeholders filled from one full run.

The prose lives in the template; this module only reads figures from the results dict and
formats them (nothing typed in by hand). A placeholder the template names and this module
does not fill is an error, so the two cannot drift apart silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import Any

from . import common, scale_out, tables, targets
from .systems import SYSTEMS
from .tables import fmt, fmt_num, get, median, ratio, variant

TEMPLATE = common.BENCH / "benchmarks.md.tmpl"
DOCS = common.ROOT / "docs" / "benchmarks.md"
PEERS = ("django_tasks_db", "procrastinate", "vtasks")
#: ALKQUEUE["RECLAIM_INTERVAL"]'s default (docs/reference.md): the leader's check period.
RECLAIM_INTERVAL = 5.0


#: bench/flow_control.py's last full run, and the heading of its section of the page.
FLOW_RESULTS = common.RESULTS / "flow-full.json"
FLOW_HEADING = "## Flow control (issue 34)"


def write(results: dict[str, Any]) -> None:
    DOCS.write_text(render(results))


def render(results: dict[str, Any]) -> str:
    items = targets.evaluate(results)
    fields = {**_overview(results, items), **_drain(results), **_scale(results, items)}
    fields.update(_knobs(results))
    flow = json.loads(FLOW_RESULTS.read_text()) if FLOW_RESULTS.exists() else None
    fields["flow_control"] = flow_section(flow)
    fields["cancel_latency"] = cancel_latency(CANCEL_RESULTS)
    fields["process_pool"] = process_pool(POOL_RESULTS)
    fields["kept_history"] = kept_history(KEPT_RESULTS)
    fields["held_vacuum"] = held_vacuum(HELD_RESULTS)
    fields["defaults"] = defaults_section(DEFAULTS_RESULTS)
    fields["workflows"] = workflows_section(WORKFLOW_RESULTS)
    fields["durable_steps"] = steps_section(STEPS_RESULTS)
    fields["scale_out"] = scale_out.section(scale_out.RESULTS)
    fields["soak"] = _soak()
    fields["observability"] = _observability()
    return Template(TEMPLATE.read_text()).substitute(fields)


def _observability() -> str:
    """bench/observability.py's section, from its last full run, between its markers (which
    that script rewrites after each full run of its own)."""
    from . import observability

    path = common.RESULTS / "observability-full.json"
    if not path.exists():
        return f"{observability.BEGIN}\n(written by bench/observability.py)\n{observability.END}"
    return observability.section(json.loads(path.read_text()))


# -- flow control (bench/flow_control.py, its own run) ---------------------------------------------


def write_flow_section(flow: dict[str, Any]) -> None:
    """Replace the flow-control section of docs/benchmarks.md with this run's."""
    _write_section(FLOW_HEADING, flow_section(flow))


def _write_section(heading: str, body_text: str) -> None:
    """Replace the body of one section of docs/benchmarks.md (the rest of the page is
    bench.run's, rewritten only by a full run of it)."""
    text = DOCS.read_text()
    body = _body_start(text, heading)
    rest = text[_body_end(text, body) :]
    DOCS.write_text(text[:body] + "\n" + body_text.strip("\n") + "\n\n" + rest)


def _write_template_section(heading: str, fields: dict[str, str]) -> None:
    """Replace one section of docs/benchmarks.md with the template's, its placeholders filled
    (the prose stays in the template, written once)."""
    template = TEMPLATE.read_text()
    start = _body_start(template, heading)
    section = template[start : _body_end(template, start)]
    _write_section(heading, Template(section).substitute(fields))


def _body_start(text: str, heading: str) -> int:
    return text.index(heading + "\n") + len(heading) + 1


def _body_end(text: str, body: int) -> int:
    """Where the next section's heading starts (the end of the text after the last)."""
    end = text.find("\n## ", body)
    return len(text) if end < 0 else end + 1


def _drain_note(drain: dict[str, Any]) -> list[str]:
    """The two drains run one after the other: a limited drain faster than the unlimited one
    says the machine's load moved between them."""
    if drain["jobs/s, key_concurrency=1"] <= drain["jobs/s, no limits"]:
        return []
    return [
        "The limited drain outran the unlimited one: the two run one after the other, and "
        "the load of the machine's other work moved between them. Read it as the limits "
        "costing the drain nothing measurable in this run, not as a gain.",
        "",
    ]


def _claim_ack_rounds(claim: dict[str, Any]) -> list[str]:
    """Each round's claim+ack ratios, beside the table's best-of-rounds ones: on a shared
    machine a verdict near its bound may turn with the round."""
    key = "us per job per round (none, concurrency, key_concurrency=1)"
    parts = []
    for size in ("1", "100"):
        rounds = claim[f"claim size {size}"].get(key)
        if rounds:
            ratios = ", ".join(f"x{cap / none:.2f} and x{keyed / none:.2f}"
                               for none, cap, keyed in rounds)  # fmt: skip
            parts.append(f"claim size {size}: {ratios}")
    if not parts:
        return []
    return [
        "The claim+ack rows compare each loop's best round. Each round's own ratios "
        f"(`concurrency` and `key_concurrency=1` against no limits): {'; '.join(parts)}.",
        "",
    ]


def _turns_bound(rate: dict[str, Any]) -> float:
    """Claims per second of one queue when each claim holds its gate for one commit only."""
    return float(rate["jobs per claim"]) * 1000 / float(rate["ms per durable commit"])


def _flow_row(target: str, wanted: str, measured: str, met: bool) -> str:
    return f"| {target} | {wanted} | {measured} | {'met' if met else '**missed**'} |"


def flow_section(flow: dict[str, Any] | None) -> str:
    """The four speed figures of issue 34, each against its target, and where the time goes."""
    if flow is None:
        return "No full run of `bench/flow_control.py` yet (`make bench` runs it).\n"
    run = flow["run"]
    claim = flow["claim+ack"]
    drain = flow["drain over 1,000 keys, 2 processes"]
    busy = flow["concurrency=8, 2 x 16 threads, 10 ms jobs"]
    rate = flow["rate=2000/s, 2 x 16 threads"]
    rows = []
    for size in ("1", "100"):
        c = claim[f"claim size {size}"]
        none = c["us per job, no limits"]
        for name, key in (("concurrency", "concurrency"), ("key_concurrency=1", "key_concurrency")):
            limited = c["us per job, " + name]
            x = c[f"ratio {key} / none"]
            measured = f"{limited:,.0f} / {none:,.0f} us per job = x{x:.2f}"
            target = f"claim+ack, claim size {size}, `{name}` (1,000 keys)"
            rows.append(_flow_row(target, "within 2x of no limits", measured, x <= 2))
    share = drain["ratio key_concurrency / none"]  # the limited rate over the unlimited one
    rows.append(_flow_row(
        f"drain of {drain['jobs']:,} jobs, 1,000 keys, `key_concurrency=1`, 2 processes",
        ">= 50% of no limits",
        f"{drain['jobs/s, key_concurrency=1']:,} / {drain['jobs/s, no limits']:,} jobs/s = "
        f"{share:.0%}", share >= 0.5))  # fmt: skip
    busy_share, most = busy["share of the cap busy"], busy["most live claims at once"]
    rows.append(_flow_row("`concurrency=8`, 2 x 16 threads, 10 ms jobs", ">= 95% busy, never > 8",
                          f"{busy_share:.0%} busy, at most {most} at once",
                          busy_share >= 0.95 and most <= 8))  # fmt: skip
    achieved, peak = rate["claims/s achieved"], rate["most claims in any 1 s window"]
    rows.append(_flow_row('`rate="2000/s"`, 2 x 16 threads', "1,800-2,000/s, never > 2,000 in 1 s",
                          f"{achieved:,}/s, at most {peak:,} in 1 s",
                          1800 <= achieved <= 2000 and peak <= 2000))  # fmt: skip
    return "\n".join([
        f"`bench/flow_control.py` ({run['mode']} run of {run['started']}, {run['cores']} cores, "
        f"load average {run['load average at the end']} at its end): each figure is a ratio or a "
        "bound within this one run, the limited queue against the same work without limits.",
        "",
        "| target | wanted | measured | verdict |",
        "|---|---|---|---|",
        *rows,
        "",
        *_drain_note(drain),
        *_claim_ack_rounds(claim),
        "Where the time goes:",
        "",
        f"- **A slot of `concurrency=8`** spends, per job, {busy['ms claim to start']} ms from "
        f"its claim to its handler's start (the claim's stamp and commit, the hand-over), "
        f"{busy['ms handler']} ms in the handler, and {busy['ms idle per job']} ms idle: the "
        "job's ack commits, and only then may the next claim take the slot. With nothing "
        "but one durable commit between two jobs (its median, measured after the run), a "
        f"slot would be at most {busy['share bound, one commit idle per job']:.0%} busy.",
        f"- **The rate**: claims of one queue take turns at its gate, each holding it to its "
        f"commit: {rate['claim transactions/s']} claim transactions a second of "
        f"{rate['jobs per claim']} jobs each, {rate['ms per claim at the gate']} ms per claim "
        f"(a durable commit alone is {rate['ms per durable commit']} ms). Claims that take "
        f"turns and each wait for a commit reach at most {_turns_bound(rate):,.0f} claims/s "
        f"at {rate['jobs per claim']} jobs per claim on this server now: "
        "2,000/s needs a commit of under 4 ms with claims of 8, which each worker's "
        "16 threads take when half of them are free.",
        "",
    ])  # fmt: skip


#: What bench/cancel_latency.py wrote in the full run (`make bench` runs it after bench.run).
CANCEL_RESULTS = common.BENCH / "results" / "cancel-full.json"


def cancel_latency(path: Path) -> str:
    """The cancel-to-stop figures of bench/cancel_latency.py, as a list."""
    if not path.exists():
        return "- not measured in this run (`python -m bench.cancel_latency`)"
    figures = json.loads(path.read_text())
    lines = []
    for label in ("from the call", "from the commit"):
        f = figures[label]
        lines.append(f"- {label} of `Queue.cancel()`: p50 {f['p50 ms']} ms, p99 {f['p99 ms']} "
                     f"ms, max {f['max ms']} ms")  # fmt: skip
    return "\n".join(lines) + f"\n\n({figures['cancels']} cancels, one after another.)"


#: What bench/process_pool.py wrote in the full run (`make bench` runs it after bench.run),
#: and the heading of its section of the page.
POOL_RESULTS = common.BENCH / "results" / "pool-full.json"
POOL_HEADING = "## The process pool"


def write_process_pool_section() -> None:
    """Replace the process-pool section of docs/benchmarks.md with the last full run's."""
    _write_template_section(POOL_HEADING, {"process_pool": process_pool(POOL_RESULTS)})


def process_pool(path: Path) -> str:
    """The process pool's drain against the thread pool's (bench/process_pool.py), a list."""
    if not path.exists():
        return "- not measured in this run (`python -m bench.process_pool`)"
    f = json.loads(path.read_text())
    rounds = ", ".join(f"{a:,} / {b:,}" for a, b in f["rounds (thread, process)"])
    return (f"- `--pool thread`: {f['thread jobs/s']:,} jobs/s\n"
            f"- `--pool process`: {f['process jobs/s']:,} jobs/s, "
            f"**{f['process / thread']:.2f}** of the thread pool's\n\n"
            f"({f['jobs']:,} no-op jobs, {f['rounds']} rounds taking turns, on "
            f"{f['database']}; each round's jobs/s, thread / process: {rounds}.)")  # fmt: skip


#: What bench/defaults.py wrote in the full run (`make bench` runs it after bench.run), and
#: the heading of its section of the page.
DEFAULTS_RESULTS = common.BENCH / "results" / "defaults-full.json"
DEFAULTS_HEADING = "## Fast by default (issue 39)"


def write_defaults_section() -> None:
    """Replace the fast-by-default section of docs/benchmarks.md with the last full run's."""
    _write_template_section(DEFAULTS_HEADING, {"defaults": defaults_section(DEFAULTS_RESULTS)})


def defaults_section(path: Path) -> str:
    """The defaults' drain against the tuned ones', the verbosity's cost and the hold check
    (bench/defaults.py), a table and a list."""
    if not path.exists():
        return "- not measured in this run (`python -m bench.defaults`)"
    f = json.loads(path.read_text())
    drain, hold = f["drain"], f["hold"]
    rows = [f"| `{('alk_worker ' + name.removeprefix('defaults').strip()).strip()}` | "
            f"{r['median']:,} | {r['min']:,} to {r['max']:,} |"
            for name, r in drain["jobs/s"].items()]  # fmt: skip
    share, cost = drain["defaults / best tuned"], drain["defaults / defaults -v 0"]
    share_target = drain["targets"]["defaults / best tuned"]
    cost_target = drain["targets"]["defaults / defaults -v 0"]
    held = ", ".join(f"{h:.2f} s" for h in hold["longest hold past the limit, s"])

    def verdict(met: bool) -> str:
        return "met" if met else "**missed**"

    return "\n".join([
        "| workers (2 processes) | jobs/s, median | min to max |", "|---|---|---|", *rows, "",
        f"- the defaults: **{share:.0%}** of the best tuned (`{drain['best tuned']}`; target: "
        f"at least {share_target:.0%}; {verdict(share >= share_target)})",
        f"- `-v 1` against `-v 0`: **{cost:.0%}** (target: at least "
        f"{cost_target:.0%}; {verdict(cost >= cost_target)})",
        f"- {hold['jobs']} jobs of {hold['seconds each']:g} s, 2 default workers: the longest "
        f"wait of a claimed job, unstarted, past {hold['hold limit, s']:g} s while the other "
        f"worker had a free thread, per round: {held} ({verdict(hold['met'])})",
        "",
        f"({drain['jobs']:,} no-op jobs, {drain['rounds']} rounds taking turns, on "
        f"{f['database']}; load average (1, 5, 15 min) {', '.join(map(str, f['load average']))} "
        f"before the run and {', '.join(map(str, f['load average after']))} after.)",
    ])  # fmt: skip


#: What bench/kept_history.py wrote in the full run (`make bench` runs it after bench.run),
#: and the heading of its section of the page.
KEPT_RESULTS = common.BENCH / "results" / "kept-full.json"
KEPT_HEADING = "## Kept history"


def write_kept_history_section() -> None:
    """Replace the kept-history section of docs/benchmarks.md with the last full run's."""
    _write_template_section(KEPT_HEADING, {"kept_history": kept_history(KEPT_RESULTS)})


def kept_history(path: Path) -> str:
    """The drain with keep on against keep off (bench/kept_history.py) and issue 35's target,
    as a list."""
    if not path.exists():
        return "- not measured in this run (`python -m bench.kept_history`)"
    f = json.loads(path.read_text())
    share, target = f["on / off"], f["target"]
    rounds = ", ".join(f"{off:,} / {on:,}" for off, on in f["rounds (off, on)"])
    return (f"- keep off: {f['keep off jobs/s']:,} jobs/s\n"
            f"- keep on: {f['keep on jobs/s']:,} jobs/s, **{share:.0%}** of keep off (target: at "
            f"least {target:.0%}; {'met' if share >= target else '**missed**'})\n\n"
            f"({f['jobs']:,} no-op jobs, `--concurrency {f['concurrency']}`, {f['rounds']} "
            f"rounds taking turns, on {f['database']}; each round's jobs/s, off / on: "
            f"{rounds}.)")  # fmt: skip


#: The heading of bench/scale_out.py's section of the page (its own module formats it).
SCALE_OUT_HEADING = "## Scale-out (issue 39)"


def write_scale_out_section() -> None:
    """Replace the scale-out section of docs/benchmarks.md with the last full run's."""
    _write_template_section(SCALE_OUT_HEADING,
                            {"scale_out": scale_out.section(scale_out.RESULTS)})  # fmt: skip


#: What bench/held_vacuum.py wrote in the full run, and the heading of its section of the page.
HELD_RESULTS = common.BENCH / "results" / "held-full.json"
HELD_HEADING = "## A held-back vacuum (issue 39)"


def write_held_vacuum_section() -> None:
    """Replace the held-back vacuum section of docs/benchmarks.md with the last full run's."""
    _write_template_section(HELD_HEADING, {"held_vacuum": held_vacuum(HELD_RESULTS)})


def held_vacuum(path: Path) -> str:
    """Each drain with a snapshot held against the same drain free (bench/held_vacuum.py),
    a table, and issue 39's target."""
    if not path.exists():
        return "- not measured in this run (`python -m bench.held_vacuum`)"
    f = json.loads(path.read_text())
    lines = ["| configuration | no snapshot held | snapshot held | held / free | "
             "server CPU per job, free / held | VACUUMs while held |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for d in f["drains"]:
        share = d["held / free"]
        met = "met" if d["met"] else "**missed**"
        met = met if d["system"] == "alkqueue" else "the ceiling, no target"
        lines.append(
            f"| {d['config']} | {fmt(d['free jobs/s'])} jobs/s | "
            f"{fmt(d['held jobs/s'])} jobs/s | **{share['median']:.0%}** "
            f"({share['min']:.0%}-{share['max']:.0%}; {met}) | "
            f"{d['free server cpu ms/job']['median']:.3f} / "
            f"{d['held server cpu ms/job']['median']:.3f} ms | "
            f"{', '.join(str(v) for v in d['held vacuums'])} |"
        )  # fmt: skip
    lines += ["", f"({f['jobs']:,} no-op jobs per drain, {f['processes']} processes, "
              f"{f['rounds']} rounds, held and free taking turns; target: held at least "
              f"{f['target']:.0%} of free for `alk_worker`; load average before "
              f"{f['load average before'][0]}, after {f['load average after'][0]}; "
              f"{f['minutes']} minutes.)"]  # fmt: skip
    return "\n".join(lines)


#: What bench/workflows.py wrote in the full run, and the heading of its section of the page.
WORKFLOW_RESULTS = common.BENCH / "results" / "workflows-full.json"
WORKFLOW_HEADING = "## Workflows (issue 36)"


def write_workflows_section() -> None:
    """Replace the workflows section of docs/benchmarks.md with the last full run's."""
    _write_section(WORKFLOW_HEADING, workflows_section(WORKFLOW_RESULTS))


def workflows_section(path: Path) -> str:
    """bench/workflows.py's figures against issue 36's targets: the section's body."""
    if not path.exists():
        return "Not measured in this run (`python -m bench.workflows`)."
    f = json.loads(path.read_text())
    drain, late = f["batch drain"], f["latency"]
    met = "met" if drain["batch / plain"] >= 0.70 else "**missed**"
    in_time = "met" if late["callback p99 ms"] <= 1000 else "**missed**"
    rounds = ", ".join(
        f"{plain:,} / {batched:,}" for plain, batched in drain["rounds (plain, batch)"]
    )
    return (
        "`bench/workflows.py`, run by `make bench` after the main run, on "
        f"{f['database']}:\n\n"
        "| what | target | measured | |\n|---|---|---|---|\n"
        f"| {drain['jobs']:,}-member batch drained by {drain['workers']} workers "
        f"(`--concurrency {drain['concurrency']}`), against the same drain without a batch "
        f"| at least 0.70 | **{drain['batch / plain']:.2f}** ({drain['batch jobs/s']:,} against "
        f"{drain['plain jobs/s']:,} jobs/s) | {met} |\n"
        f"| the callback enqueued after the last member's handler returned, p99 "
        f"| at most 1 s | **{late['callback p99 ms']:,} ms** (p50 {late['callback p50 ms']} ms, "
        f"max {late['callback max ms']} ms) | {in_time} |\n"
        f"| a dependent claimed after its dependency's handler returned "
        f"| (measured) | p50 **{late['release p50 ms']} ms**, p99 **{late['release p99 ms']} ms** "
        f"(max {late['release max ms']} ms) | |\n\n"
        f"Each drain's rate is N over the two workers' wall time, start-up included; "
        f"{drain['rounds']} rounds took turns (jobs/s, plain / batch: {rounds}) and the ratio is "
        f"that of the medians. The latencies are over {late['repetitions']} repetitions with one "
        "worker (`--concurrency 4`); the callback's includes the acker's group-commit window. "
        "What a batch costs: each group of member acks is followed by one transaction of three "
        "statements (the dependents' edges, the members' outcomes, the last-member probe; "
        'docs/workflows.md, "The ack"), where a plain group\'s ack is its one DELETE.'
    )


#: What bench/durable_steps.py wrote in the full run, and the heading of its section.
STEPS_RESULTS = common.BENCH / "results" / "steps-full.json"
STEPS_HEADING = "## Durable steps (issue 51)"


def write_steps_section() -> None:
    """Replace the durable steps section of docs/benchmarks.md with the last full run's."""
    _write_section(STEPS_HEADING, steps_section(STEPS_RESULTS))


def steps_section(path: Path) -> str:
    """bench/durable_steps.py's figures against issue 51's targets: the section's body."""
    if not path.exists():
        return "Not measured in this run (`python -m bench.durable_steps`)."
    f = json.loads(path.read_text())
    steps, sig, sleep = f["steps against raw"], f["signal"], f["sleeping drain"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    return (
        "`bench/durable_steps.py`, run by `make bench` after the main run, on "
        f"{f['database']}:\n\n"
        "| what | target | measured | |\n|---|---|---|---|\n"
        f"| {steps['jobs']:,} jobs of {steps['steps per job']} no-op `job.step` calls, one "
        f"worker of {steps['threads']} threads, against {steps['threads']} threads doing one "
        f"INSERT and one commit per step | at least 0.70 | **{steps['steps / raw']:.2f}** "
        f"({steps['steps/s']:,} steps/s against {steps['raw rows/s']:,} rows/s) "
        f"| {verdict(steps['steps / raw'] >= 0.70)} |\n"
        f"| `Queue.signal` to the waiting handler running again, p50 / p99 | at most 50 / 250 "
        f"ms | **{sig['signal p50 ms']} / {sig['signal p99 ms']} ms** (max "
        f"{sig['signal max ms']} ms) "
        f"| {verdict(sig['signal p50 ms'] <= 50 and sig['signal p99 ms'] <= 250)} |\n"
        f"| {sleep['jobs']:,} jobs woken from a {sleep['sleep s']:g} s `job.sleep`, drained "
        f"by one worker of {sleep['threads']} threads, against the same jobs without a sleep "
        f"| at least 0.50 | **{sleep['woken / plain']:.2f}** ({sleep['woken jobs/s']:,} "
        f"against {sleep['plain jobs/s']:,} jobs/s) | {verdict(sleep['woken / plain'] >= 0.5)} "
        "|\n\n"
        "The steps' rate counts the worker's claims and acks too (the time from the worker's "
        "first claim to the queue empty); each step is one INSERT committed before "
        "`job.step` returns, and the first step of a run its share of one read of its "
        "claim's steps. The "
        f"signal latency is over {sig['repetitions']} repetitions with one idle worker woken "
        "by NOTIFY. A sleeping job is two handler runs: the first records the sleep and puts "
        "the job back to scheduled without holding a thread (one transaction of its own, "
        "not group-committed as acks are); the second, woken, reads its claim's steps (the "
        "sleep returns at once) and acks with its steps' delete. The first pass runs in a "
        "worker of its own; once every job is due, a fresh worker drains the woken jobs, "
        "timed as the plain drain is: from its first claim to the queue empty (a clock "
        "started during the wake-ups would measure the pace at which the first pass put the "
        "jobs to sleep)."
    )


def _soak() -> str:
    """The last soak run's section (bench/soak.py writes it), kept across full runs."""
    path = common.RESULTS / "soak.md"
    return path.read_text().strip() if path.exists() else "No soak run recorded yet."


# -- small readers --------------------------------------------------------------------------------


def _f(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _x(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else f"x{value:{spec}}"


def _scan(results: dict[str, Any], system: str) -> list[dict[str, Any]]:
    return get(results, "systems", system, "scan") or []


def _items(items: list[dict[str, Any]], prefix: str) -> str:
    verdict = {True: "met", False: "missed", None: "not measured"}
    found = [i for i in items if i["key"].startswith(prefix)]
    return "; ".join(f"{i['target']}: {i['measured']} ({verdict[i['ok']]})" for i in found) or "-"


# -- the parts of the page -------------------------------------------------------------------------


def _overview(results: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, str]:
    p = results["params"]
    side = get(results, "systems", "alkqueue", "side_by_side") or {}
    missed = [i["target"] for i in items if i["ok"] is False]
    return {
        "command": results["command"],
        "started": results["started"],
        "noise": noise(results),
        "machine": tables.machine_lines(results),
        "autovacuum": get(results, "machine", "postgresql", "autovacuum") or "-",
        "n": f"{p['n']:,}",
        "n_single": f"{p['n_single']:,}",
        "reps": str(p["reps"]),
        "single_chunk": str(get(side, "single", "chunk") or "-"),
        "bulk_pairs": str(get(side, "bulk", "ratio", "n") or "-"),
        "main_table": tables.main_table(results),
        "targets_table": targets.table(items),
        "engines_table": tables.engines_table(results),
        "missed": ("Missed in this run: " + "; ".join(missed) + ".")
        if missed
        else "Every measured target is met in this run.",
        "single_side": _single_side(side.get("single")),
        **_bulk_side(side.get("bulk")),
        "admin": tables.admin_lines(results),
        "scan_table": tables.scan_table(results),
        "errors": tables.errors(results),
        "load": tables.load_lines(results),
    }


def _single_side(side: dict[str, Any] | None) -> str:
    if not side:
        return "not measured"
    ours, raw = side["jobs_per_s"]["alkqueue"], side["jobs_per_s"]["raw"]
    return (f"`enqueue()` {fmt(ours)} jobs/s against the raw `INSERT`'s {fmt(raw)}, "
            f"{_f(ratio(median(ours), median(raw)), '.0%')}, taking turns every {side['chunk']} "
            f"calls{side.get('among', '')}, {side['n']:,} calls each per repetition")  # fmt: skip


def _bulk_side(side: dict[str, Any] | None) -> dict[str, str]:
    jobs, paired = (side or {}).get("jobs_per_s") or {}, (side or {}).get("ratio")
    spread = f"{paired['median']:.0%} ({paired['min']:.0%}-{paired['max']:.0%})" if paired else "-"
    return {"bulk_n": f"{side['n']:,}" if side else "-", "bulk_raw": fmt(jobs.get("raw")),
            "bulk_ours": fmt(jobs.get("alkqueue")), "bulk_ratio": spread}  # fmt: skip


def noise(results: dict[str, Any]) -> str:
    """How quiet the machine was, what the server's configuration changed, what failed."""
    loads, busy, restarts = [], set(), 0
    for res in results["systems"].values():
        for when in ("before", "after"):
            if snap := get(res, "load", when):
                loads.append(snap["loadavg"][0])
                busy.update(b["cmd"][:70] for b in snap["busy"] if "bench" not in b["cmd"])
        restarts += len(res.get("retried") or [])
    nproc = results["machine"]["nproc"]
    lines = ["## Noise"]
    if loads and max(loads) > 1.0:
        lines.append(f"This run shared the machine with other work: the 1-minute load average "
                     f"around the systems ranged {min(loads):.1f} to {max(loads):.1f} on {nproc} "
                     "cores (figures are noisy; compare ratios within the run, and the min-max "
                     "ranges).")  # fmt: skip
        if busy:
            lines.append("Other busy processes seen: "
                         + "; ".join(f"`{b}`" for b in sorted(busy)[:6]) + ".")  # fmt: skip
    else:
        lines.append(f"The machine was otherwise idle (1-minute load average at most "
                     f"{max(loads or [0]):.1f} on {nproc} cores).")  # fmt: skip
    if restarts:
        lines.append(f"The PostgreSQL server was restarted under the run {restarts} time(s) (by "
                     "other test suites on this machine); the interrupted steps were run again "
                     "(listed at the end).")  # fmt: skip
    for res in results["systems"].values():
        errors = res.get("errors") or {}
        if "suite" in errors:
            lines.append(f"{res.get('title', res['system'])}: not measured in this run. Its "
                         f"suite process ended ({errors['suite']}; a negative code is the signal "
                         "that ended it) before it wrote any figure.")  # fmt: skip
        lost = [s for s, err in errors.items() if common.is_connection_error(Exception(err))]
        if lost:
            lines.append(f"{res.get('title', res['system'])}: no figure from {'; '.join(lost)}. "
                         "The server was restarted under these steps more often than the "
                         "harness retries them; the table's figure is the median of the "
                         "repetitions that completed (a dash when none did).")  # fmt: skip
    missing = [name.replace("_", "-") for name in SYSTEMS if name not in results["systems"]]
    if missing and results.get("mode") == "full":
        lines.append(f"Not in this run: {', '.join(missing)}. This page has no figure of "
                     "theirs, and the targets that compare peers compare the peers measured "
                     "here.")  # fmt: skip
    for merge in results.get("merged") or []:
        titles = [get(results, "systems", name, "title") or name for name in merge["systems"]]
        lines.append(f"{', '.join(titles)} were measured again from {merge['started']} "
                     "(`--merge`) and merged into this run's results: their figures come from "
                     "a later time window than the other systems'.")  # fmt: skip
    return "\n\n".join(lines)


def _drain(results: dict[str, Any]) -> dict[str, str]:
    """The figures of the drain paragraph: the fastest peer, the CPU budget of 10x it."""
    ours = variant(results, "alkqueue")
    raw100, raw1000 = variant(results, "raw", "claim 100 "), variant(results, "raw", "claim 1000")
    d2 = median(get(ours, "drain_2", "jobs_per_s"))
    peers = sorted(((median(get(variant(results, p), "drain_2", "jobs_per_s")) or 0.0, p)
                    for p in PEERS), reverse=True)  # fmt: skip
    peer_rate, peer = peers[0]
    nproc = results["machine"]["nproc"]
    needed = 10 * peer_rate or None
    budget = ratio(nproc * 1000, needed)
    worker = median(get(ours, "drain_2", "cpu_ms_per_job"))
    server = median(get(ours, "drain_2", "server_cpu_ms_per_job"))
    cpu = worker + server if worker is not None and server is not None else None
    spent = cpu * d2 if cpu and d2 else None  # ms of CPU per second of the drain
    cores, target_cpu = ratio(spent, 1000), ratio(spent, needed)
    raw_server = median(get(raw100, "drain_2", "server_cpu_ms_per_job"))
    poll, n = median(get(ours, "drain_2", "poll_server_cpu_ms_per_job")), get(ours, "drain_2", "n")
    r100, r1000 = (
        median(get(raw100, "drain_2", "jobs_per_s")),
        median(get(raw1000, "drain_2", "jobs_per_s")),
    )
    per_job_vtasks = [
        r["jobs_per_s"] for r in _scan(results, "vtasks") if "batch" not in r["config"]
    ]
    per_job_ours = [
        r for r in _scan(results, "alkqueue")
        if "@consumer(batch=" not in r["config"] and not r["informational"]
    ]  # fmt: skip
    best = max(per_job_ours, key=lambda r: r["jobs_per_s"], default=None)
    vtasks_batch = (variant(results, "vtasks").get("options") or {}).get("batch")
    others = [f"{get(results, 'systems', p, 'title')} {fmt_num(r)} jobs/s "
              f"({_f(ratio(d2, r), '.0f', 'x')})" for r, p in peers[1:] if r]  # fmt: skip
    return {
        "peer_title": get(results, "systems", peer, "title") or "-",
        "peer_config": variant(results, peer).get("config", "-"),
        "peer_rate": fmt_num(peer_rate or None),
        "ours_d2": fmt_num(d2),
        "peer_x": _f(ratio(d2, peer_rate), ".1f", "x"),
        "vtasks_batch": f"count {vtasks_batch:,}" if vtasks_batch else "no batch queue",
        "vtasks_per_job": fmt_num(max(per_job_vtasks, default=None)),
        "ours_config": ours.get("config", "-"),
        "ours_per_job": f"{fmt_num(best['jobs_per_s'])} jobs/s (`{best['config']}`)"
        if best
        else "-",
        "needed": fmt_num(needed),
        "nproc": str(nproc),
        "budget": _f(budget, ".3f"),
        "worker_cpu": _f(worker, ".3f"),
        "server_cpu": _f(server, ".3f"),
        "raw_server_cpu": _f(raw_server, ".3f"),
        "raw_over_budget": ": the server's share alone is over that budget"
        if raw_server and budget and raw_server > budget
        else "",
        "cpu_per_job": _f(cpu, ".3f"),
        "cores": _f(cores, ".2f"),
        "machine_busy": _f(median(get(ours, "drain_2", "machine_busy")), ".0%"),
        "poll_ms": _f(poll * n if poll is not None and n else None, ".0f"),
        "target_cpu": _f(target_cpu, ".3f"),
        "less": _f(1 - target_cpu / cpu if target_cpu and cpu else None, ".0%"),
        "raw1000_cpu": _f(median(get(raw1000, "drain_2", "cpu_ms_per_job")), ".3f"),
        "ceiling": "Larger batches do not lift the machine's ceiling that far"
        if needed and max(r100 or 0, r1000 or 0) < needed
        else "For comparison",
        "r1000": fmt_num(r1000),
        "r100": fmt_num(r100),
        "other_peers": "; ".join(others) or "-",
    }


def _scale(results: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, str]:
    """The figures of the claim+ack section and of the two after-acks paragraphs."""
    scale = get(results, "systems", "alkqueue", "scale") or {}
    raw = get(results, "systems", "raw", "scale") or {}
    big = get(scale, "sizes", "big") or 1_000_000
    acked, vacuumed = f"after_{big}_acked_no_vacuum", f"after_{big}_acked_then_vacuum"
    lapsed = f"after_{big}_acked_leases_lapsed"
    clean = median(get(scale, acked, "b1", "baseline_us_per_job"))
    bloated = median(get(scale, acked, "b1", "us_per_job"))
    raw_clean = median(get(raw, acked, "b1", "baseline_us_per_job"))
    raw_bloated = median(get(raw, acked, "b1", "us_per_job"))
    walk = bloated - clean if bloated is not None and clean is not None else None
    per_100k = walk * 100_000 / big if walk is not None else None
    d2 = median(get(variant(results, "alkqueue"), "drain_2", "jobs_per_s"))
    between = d2 * RECLAIM_INTERVAL if d2 else None
    worst = clean + per_100k * between / 100_000 if clean and per_100k and between else None
    dead = scale.get("bloat_dead_tuples")
    return {
        "drain_peers": _items(items, "drain_peers"),
        "bign": "1M" if big == 1_000_000 else f"{big // 1000}k",
        "acked": _items(items, f"scale_{acked}"),
        "lapsed": _items(items, f"scale_{lapsed}"),
        "dead_tuples": f"{dead:,}" if isinstance(dead, int) and dead >= 0 else "-",
        "walk_us": _f(walk, ",.0f"),
        "clean_us": _f(clean, ",.0f"),
        "raw_walk_us": _f(raw_bloated - raw_clean if raw_bloated and raw_clean else None, ",.0f"),
        "raw_clean_us": _f(raw_clean, ",.0f"),
        "raw_acked_b1": _x(targets.scale_ratio(raw, acked, "b1")),
        "vacuum_b1": _x(targets.scale_ratio(scale, vacuumed, "b1")),
        "vacuum_b100": _x(targets.scale_ratio(scale, vacuumed, "b100")),
        "acked_repetitions": _repetitions(scale, acked),
        "lapsed_repetitions": _repetitions(scale, lapsed),
        "per_100k_us": _f(per_100k, ",.0f"),
        "reclaim_interval": f"{RECLAIM_INTERVAL:g}",
        "between": fmt_num(between),
        "worst_us": _f(worst, ",.0f"),
        "worst_x": _x(ratio(worst, clean), ".1f"),
        "alk_method": scale.get("method") or "-",
        "raw_method": raw.get("method") or "-",
        "alk_fill": scale.get("fill") or "-",
        "scale_repetitions": _scale_repetitions(scale),
        "scale_table": tables.scale_table(results),
        "bloat_notes": _bloat_notes(results),
    }


def _repetitions(scale: dict[str, Any], key: str) -> str:
    """Every repetition of a row's loops, beside the 10k-pending row's and the baseline's."""
    text = []
    for b, label in (("b1", "Claim 1"), ("b100", "Claim 100")):
        values = get(scale, key, b, "us_per_job", "values") or []
        alone = get(scale, "pending_10000", b, "us_per_job", "values") or []
        beside = get(scale, key, b, "baseline_us_per_job", "values") or []
        if not values:
            continue
        line = (f"{label}, each repetition: {_list(values)} us per job, against {_list(alone)} "
                f"at 10k pending alone")  # fmt: skip
        text.append(
            line + (f" and {_list(beside)} on the baseline side by side." if beside else ".")
        )
    return " ".join(text)


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:,.1f}" for v in values)


def _scale_repetitions(scale: dict[str, Any]) -> str:
    timed = [
        b for b in (get(scale, "pending_10000", "b1"), get(scale, "pending_10000", "b100")) if b
    ]
    parts = [f"claim {b['k']}: the median of {b['us_per_job']['n']} repetitions of "
             f"{b['iterations']:,} loops" for b in timed]  # fmt: skip
    return (" Each figure: " + "; ".join(parts) + ".") if parts else ""


def _bloat_notes(results: dict[str, Any]) -> str:
    lines = []
    for name in ("alkqueue", "raw"):
        scale = get(results, "systems", name, "scale") or {}
        if scale.get("bloat_ack_jobs_per_s"):
            title, big = get(results, "systems", name, "title"), scale["sizes"]["big"]
            lines.append(f"- {title}: the {big:,} acks before the bloat rows ran at "
                         f"{fmt_num(scale['bloat_ack_jobs_per_s'])} jobs/s (claim and ack "
                         f"10,000 per statement); the table then held "
                         f"{scale.get('bloat_dead_tuples', -1):,} dead tuples.")  # fmt: skip
    return "\n".join(lines)


def _knobs(results: dict[str, Any]) -> dict[str, str]:
    """The scan's rates grouped by the knob they show, and the configuration used."""
    scan = _scan(results, "alkqueue")

    def rate(keep: Any) -> str:
        hits = [r for r in scan if keep(r["config"])]
        return ", ".join(f"{fmt_num(r['jobs_per_s'])} jobs/s ({r['config']})" for r in hits) or (
            "not scanned in this run"
        )

    best = variant(results, "alkqueue").get("config", "-")
    best, _, decorator = best.partition(", @consumer(")
    worker, _, setting = best.partition(", ACK_WINDOW ")
    used = f"`alk_worker {worker}`" + (f' with `ALKQUEUE["ACK_WINDOW"] = {setting}`'
                                      if setting else "")  # fmt: skip
    if decorator:
        used += f' and a batch consumer, `@consumer("bench", {decorator}`'
    return {
        "used": used,
        "knob_batch": rate(
            lambda c: "--batch" in c and "ACK_WINDOW" not in c and "synchronous" not in c
        ),
        "knob_threads": rate(lambda c: c.endswith("--batch 1000, ACK_WINDOW 0.01")),
        "knob_consumer": rate(lambda c: "@consumer(batch=" in c),
        "knob_ack_window": rate(
            lambda c: c.startswith("--concurrency 4 --batch 500") and "synchronous" not in c
        ),
        "knob_sync": rate(lambda c: "synchronous" in c or c == "--concurrency 4 --batch 500"),
    }
