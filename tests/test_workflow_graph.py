"""The drawing plan of a workflow (workflows/graph.py): longest-path layers left to right,
rows ordered to follow their dependencies, edges outside the jobs dropped. No database."""

from __future__ import annotations

from django_alkqueue.workflows.graph import Edge, layered


def test_a_chain_puts_each_job_one_layer_right_of_the_one_it_waits_for():
    graph = layered([1, 2, 3], [Edge(2, 1), Edge(3, 2)])

    assert graph.layers == ((1,), (2,), (3,))


def test_a_job_sits_right_of_its_furthest_dependency():
    # 4 waits for 1 directly and for 3, which waits for 2, which waits for 1.
    graph = layered([1, 2, 3, 4], [Edge(2, 1), Edge(3, 2), Edge(4, 1), Edge(4, 3)])

    assert graph.positions()[4] == (3, 0)


def test_a_fan_out_and_fan_in_makes_three_layers():
    parts = [2, 3, 4]
    edges = [Edge(p, 1) for p in parts] + [Edge(5, p) for p in parts]

    graph = layered([1, *parts, 5], edges)

    assert graph.layers == ((1,), (2, 3, 4), (5,))


def test_jobs_without_dependencies_share_the_first_layer_in_id_order():
    graph = layered([7, 3, 5], [])

    assert graph.layers == ((3, 5, 7),)
    assert graph.edges == ()


def test_rows_follow_the_rows_of_their_dependencies():
    # 10 waits for 2 (row 1), 11 for 1 (row 0): 11 goes above 10.
    graph = layered([1, 2, 10, 11], [Edge(10, 2), Edge(11, 1)])

    assert graph.layers[1] == (11, 10)


def test_edges_to_jobs_outside_the_graph_are_dropped():
    graph = layered([1, 2], [Edge(2, 1, met=True), Edge(2, 99)])

    assert graph.edges == (Edge(2, 1, met=True),)


def test_a_hand_made_cycle_is_placed_right_of_everything_instead_of_looping():
    graph = layered([1, 2, 3], [Edge(2, 1), Edge(3, 2), Edge(2, 3)])

    assert graph.layers == ((1,), (2, 3))


def test_an_empty_graph_has_no_layers():
    assert layered([], []).layers == ()
