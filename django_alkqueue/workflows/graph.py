"""The drawing plan of a workflow: its jobs, its dependency edges, and the layers they sit in
(longest path from the jobs that depend on nothing, left to right). Pure: no database; the
reads are in workflows/component.py, the SVG in admin/workflow_svg.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, order=True)
class Edge:
    """Job `job_id` waits for job `depends_on`; `met` once that one succeeded."""

    job_id: int
    depends_on: int
    met: bool = False


@dataclasses.dataclass(frozen=True)
class Graph:
    nodes: tuple[int, ...]
    edges: tuple[Edge, ...]
    #: Left to right; a job sits one layer right of its furthest dependency.
    layers: tuple[tuple[int, ...], ...]

    def positions(self) -> dict[int, tuple[int, int]]:
        """Each job's (layer, row within the layer)."""
        return {job: (x, y) for x, layer in enumerate(self.layers) for y, job in enumerate(layer)}


def layered(nodes: Iterable[int], edges: Iterable[Edge]) -> Graph:
    """The graph of `nodes`, with the edges between them (others dropped), laid out."""
    jobs = tuple(sorted(set(nodes)))
    known = set(jobs)
    kept = tuple(sorted({e for e in edges if e.job_id in known and e.depends_on in known}))
    depth = longest_path_layers(jobs, kept)
    columns: list[list[int]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for job in jobs:
        columns[depth[job]].append(job)
    return Graph(jobs, kept, ordered_rows(columns, kept))


def longest_path_layers(nodes: tuple[int, ...], edges: tuple[Edge, ...]) -> dict[int, int]:
    """0 for a job with no dependency, else one more than its furthest dependency's layer.
    Cycles cannot be built (a job only depends on older ones); a hand-made one is put to the
    right of everything instead of looping."""
    waits_for: dict[int, set[int]] = {job: set() for job in nodes}
    dependents: dict[int, list[int]] = {job: [] for job in nodes}
    for edge in edges:
        waits_for[edge.job_id].add(edge.depends_on)
        dependents[edge.depends_on].append(edge.job_id)
    unplaced = {job: len(deps) for job, deps in waits_for.items()}
    ready = [job for job, n in unplaced.items() if n == 0]
    depth: dict[int, int] = {}
    while ready:
        job = ready.pop()
        depth[job] = 1 + max((depth[d] for d in waits_for[job]), default=-1)
        for dependent in dependents[job]:
            unplaced[dependent] -= 1
            if unplaced[dependent] == 0:
                ready.append(dependent)
    last = max(depth.values(), default=-1) + 1
    return {job: depth.get(job, last) for job in nodes}


def ordered_rows(columns: list[list[int]], edges: tuple[Edge, ...]) -> tuple[tuple[int, ...], ...]:
    """Each layer's jobs ordered by the mean row of their dependencies (fewer crossings), then
    by id; the first layer by id."""
    row: dict[int, float] = {}
    deps: dict[int, list[int]] = {}
    for edge in edges:
        deps.setdefault(edge.job_id, []).append(edge.depends_on)
    ordered = []
    for column in columns:
        layer = tuple(sorted(column, key=lambda job: (mean_row(deps.get(job, []), row), job)))
        row |= {job: float(i) for i, job in enumerate(layer)}
        ordered.append(layer)
    return tuple(ordered)


def mean_row(dependencies: list[int], row: dict[int, float]) -> float:
    placed = [row[d] for d in dependencies if d in row]
    return sum(placed) / len(placed) if placed else 0.0
