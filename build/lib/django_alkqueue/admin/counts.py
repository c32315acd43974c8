"""Changelist counts that stay cheap on tables with millions of rows.

Up to CAP rows are counted exactly, with a COUNT over a LIMIT subquery that stops at CAP + 1.
Beyond that, PostgreSQL's planner estimate for the filtered query is shown ("about N"); on
other databases the page says "more than CAP". There is never a full COUNT(*).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

from ..sql import dialect_for

#: Rows counted exactly before a changelist switches to an estimate.
CAP = 10_000


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """PostgreSQL's row estimate for the query (pg_class.reltuples scaled by the filters)."""
    if not dialect_for(connections[queryset.db]).supports_planner_estimates:
        return None
    plan = json.loads(queryset.order_by().explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]  # not generic at run time
    """`count` is exact up to CAP; past it `estimated` (PostgreSQL) or `at_least` is set."""

    cap = CAP

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimated = False
        self.at_least = False

    @cached_property
    def count(self) -> int:
        rows: QuerySet[Any] = self.object_list  # type: ignore[assignment]  # a QuerySet here
        bounded = rows[: self.cap + 1].count()
        if bounded <= self.cap:
            return bounded
        estimate = planner_estimate(rows)
        if estimate is None:
            self.at_least = True
            return self.cap + 1
        self.estimated = True
        return max(estimate, self.cap + 1)
