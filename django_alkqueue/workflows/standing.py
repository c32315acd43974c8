"""Where jobs stand now, whichever table holds them: a live row (waiting, pending, scheduled,
claimed), a dead letter, or the history (succeeded, cancelled). A job in none of them
finished and was not kept: what the workflow tables remember of it (a met edge means it
succeeded) is the best left, else it is "gone"."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from datetime import datetime

from ..jobs import live_state
from ..models import DeadLetter, FinishedJob, QueueMessage

#: A job no table holds any more, and no workflow row says how it finished.
GONE = "gone"


@dataclasses.dataclass(frozen=True)
class Standing:
    job_id: int
    #: A jobs.State, or GONE.
    state: str
    queue: str | None = None
    #: The dead letter's own id (its admin page's), when the job is one.
    dead_letter_id: int | None = None
    #: The history has it (its admin page is the finished job's).
    kept: bool = False


def standings(
    using: str, ids: Collection[int], now: datetime, remembered: Mapping[int, str] | None = None
) -> dict[int, Standing]:
    """Each of `ids`: one query for the live rows, then one each for the dead letters and
    the history among the rest. `remembered`: states the workflow tables know (a met
    edge's "succeeded", a batch member's outcome) for jobs no table holds."""
    found: dict[int, Standing] = {}
    live = QueueMessage.objects.using(using).filter(id__in=list(ids))
    for job_id, name, token, run_at in live.values_list("id", "queue", "claim_token", "run_at"):
        found[job_id] = Standing(job_id, live_state(token is not None, run_at, now), name)
    rest = [i for i in ids if i not in found]
    if rest:
        dead = DeadLetter.objects.using(using).filter(job_id__in=rest)
        for job_id, name, pk in dead.values_list("job_id", "queue", "id"):
            found[job_id] = Standing(job_id, "dead", name, dead_letter_id=pk)
    rest = [i for i in rest if i not in found]
    if rest:
        kept = FinishedJob.objects.using(using).filter(job_id__in=rest)
        for job_id, name, outcome in kept.values_list("job_id", "queue", "outcome"):
            found[job_id] = Standing(job_id, outcome, name, kept=True)
    known = remembered or {}
    return {i: found.get(i) or Standing(i, known.get(i, GONE)) for i in ids}
