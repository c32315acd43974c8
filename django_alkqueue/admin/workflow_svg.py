"""A small workflow drawn as server-side SVG: one box per job in its layer (workflows/graph.py),
coloured by where the job stands, each a link to the job's page, and an arrow from each
dependency to the job waiting for it. No script. Every text comes from the rows (queue names
are whatever the code passed) and is escaped by format_html; payloads are never drawn."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from ..workflows.graph import Edge, Graph
from ..workflows.standing import GONE, Standing
from .filters import ALL_STATE_LABELS

NODE_WIDTH, NODE_HEIGHT = 136, 40
GAP_X, GAP_Y, PAD = 44, 12, 6
#: Characters of a queue name a box holds; the rest is in its tooltip.
QUEUE_SHOWN = 18


def box_origin(layer: int, row: int) -> tuple[int, int]:
    return PAD + layer * (NODE_WIDTH + GAP_X), PAD + row * (NODE_HEIGHT + GAP_Y)


def drawn_state(standing: Standing) -> str:
    """The state as a class name: only the known ones, whatever a row holds."""
    return standing.state if standing.state in ALL_STATE_LABELS else GONE


def workflow_svg(
    graph: Graph,
    standings: Mapping[int, Standing],
    current: int,
    url_of: Callable[[Standing], str | None],
) -> SafeString:
    """The graph as an <svg> element, `current` (the page's job) outlined."""
    positions = graph.positions()
    width = 2 * PAD + len(graph.layers) * NODE_WIDTH + (len(graph.layers) - 1) * GAP_X
    rows = max((len(layer) for layer in graph.layers), default=0)
    height = 2 * PAD + rows * NODE_HEIGHT + max(rows - 1, 0) * GAP_Y
    label = _("Workflow of %(n)d jobs") % {"n": len(graph.nodes)}
    arrows = mark_safe("".join(edge_path(e, positions) for e in graph.edges))
    boxes = mark_safe(
        "".join(node(standings[job], positions[job], job == current, url_of) for job in graph.nodes)
    )
    return format_html(
        '<svg class="alk-graph" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'viewBox="0 0 {w} {h}" role="img" aria-label="{label}">'
        '<defs><marker id="alk-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker></defs>'
        "{arrows}{boxes}</svg>",
        w=width, h=height, label=label, arrows=arrows, boxes=boxes,
    )  # fmt: skip


def edge_path(edge: Edge, positions: Mapping[int, tuple[int, int]]) -> str:
    """From the right side of the dependency's box to the left side of the waiting job's."""
    x1, y1 = box_origin(*positions[edge.depends_on])
    x2, y2 = box_origin(*positions[edge.job_id])
    x1, y1, y2 = x1 + NODE_WIDTH, y1 + NODE_HEIGHT // 2, y2 + NODE_HEIGHT // 2
    bend = (x2 - x1) // 2
    return format_html(
        '<path class="alk-edge{}" d="M{},{} C{},{} {},{} {},{}" marker-end="url(#alk-arrow)"/>',
        " alk-edge-met" if edge.met else "", x1, y1, x1 + bend, y1, x2 - bend, y2, x2, y2,
    )  # fmt: skip


def node(
    standing: Standing,
    position: tuple[int, int],
    current: bool,
    url_of: Callable[[Standing], str | None],
) -> str:
    x, y = box_origin(*position)
    state = drawn_state(standing)
    queue = standing.queue or ""
    shown = queue if len(queue) <= QUEUE_SHOWN else queue[: QUEUE_SHOWN - 1] + "…"
    tip = f"#{standing.job_id} {queue}: {ALL_STATE_LABELS[state]}"
    box = format_html(
        '<g class="alk-node alk-node-{state}{current}" data-job="{job}"><title>{tip}</title>'
        '<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="5"/>'
        '<text x="{tx}" y="{y1}">#{job} · {label}</text><text x="{tx}" y="{y2}">{queue}</text>'
        "</g>",
        state=state, current=" alk-node-current" if current else "", job=standing.job_id,
        tip=tip, x=x, y=y, w=NODE_WIDTH, h=NODE_HEIGHT, tx=x + 7, y1=y + 16, y2=y + 32,
        label=ALL_STATE_LABELS[state], queue=shown,
    )  # fmt: skip
    url = url_of(standing)
    return format_html('<a href="{}">{}</a>', url, box) if url else box


def legend(standings: Mapping[int, Standing]) -> SafeString:
    """The states the graph shows, in the order a job goes through them."""
    present = {drawn_state(s) for s in standings.values()}
    shown = [(state, label) for state, label in ALL_STATE_LABELS.items() if state in present]
    return format_html(
        '<ul class="alk-legend alk-graph-legend">{}</ul>',
        format_html_join("", '<li><span class="alk-swatch alk-node-{}"></span>{}</li>', shown),
    )
