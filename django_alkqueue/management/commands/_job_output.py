"""What `alk_jobs` prints: tables and lines for people, in the active language, every stored
string escaped (_terminal.py); JSON for scripts, in English, timestamps as ISO 8601."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext, pgettext_lazy

from django_alkqueue.job_actions import Requeued
from django_alkqueue.job_filters import ListedJob
from django_alkqueue.jobs import HISTORY_STATES, Job
from django_alkqueue.limits import NAMES, LimitsInForce
from django_alkqueue.operations import RequeuedFromStep
from django_alkqueue.reports.flow_status import source_label

from ._terminal import json_default, printable, progress_text, table

#: The most characters of an error's first line in the list's table.
ERROR_SHOWN = 60
#: The most ids a line about a change names; --json has them all.
IDS_SHOWN = 20

LIST_COLUMNS = (
    gettext_lazy("job"),
    gettext_lazy("queue"),
    pgettext_lazy("worker", "state"),
    gettext_lazy("attempts"),
    gettext_lazy("age"),
    gettext_lazy("run at / died"),
    gettext_lazy("key"),
    gettext_lazy("error"),
)


def as_json(data: object) -> str:
    return json.dumps(data, default=json_default, indent=2)


def age(seconds: float) -> str:
    """A short age: 45s, 12m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.isoformat(timespec="seconds")


def list_table(jobs: Sequence[ListedJob], now: datetime) -> str:
    body = [
        (str(j.id), j.queue, j.state, f"{j.attempts}/{j.max_attempts}",
         age((now - j.enqueued_at).total_seconds()), _when(j.died_at or j.run_at),
         j.concurrency_key or j.unique_key or "-", (j.error or "-")[:ERROR_SHOWN])
        for j in jobs
    ]  # fmt: skip
    return table(tuple(map(str, LIST_COLUMNS)), body)


def list_json(jobs: Sequence[ListedJob]) -> str:
    return as_json([dataclasses.asdict(job) for job in jobs])


def job_text(job: Job, error_group: str | None, fair_key: str | None) -> str:
    """One job, a field a line, then its payload, its output (a job in the history's) and its last
    error in full; every value escaped. `fair_key` is read beside the job, which lacks it."""
    fields: list[tuple[object, object]] = [
        (_("job"), job.id), (_("queue"), job.queue), (pgettext("worker", "state"), job.state),
        (_("priority"), job.priority), (_("attempts"), f"{job.attempts}/{job.max_attempts}"),
        (_("enqueued at"), job.enqueued_at), (_("requeued at"), job.requeued_at),
        (_("run at"), job.run_at), (_("expires at"), job.expires_at),
        (_("claimed by"), job.claimed_by), (_("claimed at"), job.claimed_at),
        (_("lease expires at"), job.lease_expires_at), (_("died at"), job.died_at),
        (_("reason"), job.reason), (_("error group"), error_group),
        (_("finished at"), job.finished_at),
        (_("duration"), None if job.duration is None else f"{job.duration:.3f} s"),
        (_("unique key"), job.unique_key), (_("concurrency key"), job.concurrency_key),
        (_("fair key"), fair_key),
        (_("progress"), None if job.progress is None else
         f"{progress_text(job.progress)} {job.progress.note}".rstrip()),
    ]  # fmt: skip
    shown = [(str(label), _shown(value)) for label, value in fields if value is not None]
    width = max(len(label) for label, _value in shown)
    lines = [f"{label.ljust(width)}  {printable(value)}" for label, value in shown]
    lines += ["", _("payload") + ":", _indented(json.dumps(job.payload, indent=2))]
    if job.state in HISTORY_STATES:
        output = job.output_error or json.dumps(job.output, indent=2)
        lines += ["", _("output") + ":", _indented(output)]
    if job.last_error:
        lines += ["", _("last error") + ":", _indented(job.last_error)]
    return "\n".join(lines)


def job_json(job: Job, error_group: str | None, fair_key: str | None) -> str:
    data = dataclasses.asdict(job)
    data["error_group"] = error_group
    data["fair_key"] = fair_key
    return as_json(data)


def _shown(value: object) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else str(value)


def _indented(text: str) -> str:
    return "\n".join("  " + printable(line) for line in text.split("\n"))


def ids_text(ids: Sequence[int]) -> str:
    """`14, 15, 16`, or the first IDS_SHOWN and how many more."""
    shown = ", ".join(str(i) for i in ids[:IDS_SHOWN])
    if len(ids) <= IDS_SHOWN:
        return shown
    return _("%(ids)s and %(n)d more") % {"ids": shown, "n": len(ids) - IDS_SHOWN}


def requeued_lines(done: Requeued) -> list[str]:
    """What a requeue did: the jobs requeued, those kept for their unique key, those gone."""
    lines = []
    if done.requeued:
        text = ngettext(
            "requeued %(n)d dead letter: job %(ids)s",
            "requeued %(n)d dead letters: jobs %(ids)s",
            len(done.requeued),
        )
        lines.append(text % {"n": len(done.requeued), "ids": ids_text(done.requeued)})
    if done.kept:
        held = ", ".join(
            _("job %(job)d (held by job %(holder)d)") % {"job": job, "holder": by}
            for job, by in done.kept[:IDS_SHOWN]
        )
        text = ngettext(
            "kept %(n)d: a live job holds its unique key: %(jobs)s",
            "kept %(n)d: a live job holds their unique key: %(jobs)s",
            len(done.kept),
        )
        lines.append(text % {"n": len(done.kept), "jobs": held})
    if done.gone:
        text = _("%(n)d already gone (requeued or deleted by someone else): %(ids)s")
        lines.append(text % {"n": len(done.gone), "ids": ids_text(done.gone)})
    return lines


def limits_table(found: dict[str, LimitsInForce]) -> str:
    """Each queue's limits in force, each with where it comes from (code, settings, override)."""
    header = (_("queue"), *NAMES)
    body = [(name, *(_limit_cell(limits, limit) for limit in NAMES))
            for name, limits in sorted(found.items())]  # fmt: skip
    return table(header, body)


def _limit_cell(limits: LimitsInForce, name: str) -> str:
    if name not in limits.sources:
        return "-"
    value = limits.limits.describe()[name]
    return f"{value or _('no limit')} ({source_label(limits.sources[name])})"


def limits_json(found: dict[str, LimitsInForce]) -> str:
    return as_json({
        name: {"limits": limits.limits.describe(), "sources": limits.sources}
        for name, limits in sorted(found.items())
    })  # fmt: skip


def from_step_dict(done: RequeuedFromStep) -> dict[str, object]:
    """What retry --from-step did, for --json."""
    holder = done.job.id if done.job is not None and not done.requeued else None
    return {"job": done.job_id, "requeued": done.requeued, "steps_deleted": done.dropped,
            "held_by": holder, "gone": done.job is None}  # fmt: skip


def from_step_text(done: RequeuedFromStep, step: str) -> str:
    """What retry --from-step did, in a line."""
    if done.requeued:
        names = ", ".join(printable(repr(name)) for name in done.dropped)
        text = ngettext(
            "requeued job %(job)d from step %(step)s: %(n)d step deleted: %(names)s",
            "requeued job %(job)d from step %(step)s: %(n)d steps deleted: %(names)s",
            len(done.dropped),
        )
        return text % {"job": done.job_id, "step": printable(repr(step)),
                       "n": len(done.dropped), "names": names}  # fmt: skip
    if done.job is not None:
        return _("kept: a live job holds its unique key: job %(job)d (held by job %(holder)d)") % {
            "job": done.job_id, "holder": done.job.id}  # fmt: skip
    return _("no dead letter of job %(job)d") % {"job": done.job_id}
