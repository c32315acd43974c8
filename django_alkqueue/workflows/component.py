"""The workflow around a job, read from the edges: every job connected to it through
Dependency rows, either way, up to a limit (the admin draws small workflows only)."""

from __future__ import annotations

import dataclasses

from django.db.models import Q

from ..models import Dependency
from .graph import Edge


@dataclasses.dataclass(frozen=True)
class Component:
    nodes: frozenset[int]
    edges: frozenset[Edge]
    #: False when the reading stopped past the limit: `nodes` is then a lower bound.
    complete: bool


def component_of(using: str, job_id: int, limit: int) -> Component:
    """The jobs connected to `job_id`, one query per step outwards. Stops once more than
    `limit` jobs are found (or one step reads more edges than a workflow of `limit` jobs
    can have), so a huge workflow costs at most `limit` + 1 queries of bounded size."""
    max_edges = limit * (limit - 1) // 2 + 1
    seen, frontier, edges = {job_id}, {job_id}, set[Edge]()
    while frontier:
        touching = Q(job_id__in=frontier) | Q(depends_on__in=frontier)
        rows = list(
            Dependency.objects.using(using)
            .filter(touching)
            .values_list("job_id", "depends_on", "met")[:max_edges]
        )
        edges |= {Edge(job, on, met) for job, on, met in rows}
        reached = {job for job, on, _met in rows} | {on for job, on, _met in rows}
        frontier = reached - seen
        seen |= reached
        if len(seen) > limit or len(rows) == max_edges:
            return Component(frozenset(seen), frozenset(edges), complete=False)
    return Component(frozenset(seen), frozenset(edges), complete=True)
