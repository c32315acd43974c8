"""What quietly stalls a PostgreSQL queue, read from the catalog, with a plain warning when a
documented threshold is crossed (docs/admin.md, "Health"). Each check is a read (the
dialect's: sql/postgresql/catalog.py) and a judgement (`judge_*`, pure, tested with made-up
rows).

The claims of stale workers are read from our own tables and checked on every database.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count, Min, Q
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from ..conf import get_settings
from ..models import QueueMessage, Worker
from ..sql import dialect_for
from .formats import format_age, grouped

#: Dead tuples in a queue table: ten times the live table's autovacuum threshold (0002).
DEAD_TUPLES_WARN = 50_000
#: A transaction open longer than this holds back vacuum of every table, the queue's too.
OLD_TRANSACTION_WARN = 300.0
#: A replication slot whose xmin is this many transactions old holds back vacuum.
SLOT_XMIN_AGE_WARN = 1_000_000
#: InnoDB undo records not yet purged: past this, a transaction left open is holding purge
#: back and scans of the queue table walk long version chains.
HISTORY_LENGTH_WARN = 1_000_000
#: A lapsed lease still claimed after this many seconds: nothing is reclaiming.
UNRECLAIMED_WARN = 60.0
#: Claimers the claims table lists, those holding the most jobs first; the status line
#: counts them all.
CLAIMERS_SHOWN = 20


@dataclasses.dataclass(frozen=True)
class Check:
    title: str
    status: str  # what was found, one line
    warning: str | None = None  # set when a threshold is crossed
    headers: tuple[str, ...] = ()
    rows: Sequence[tuple[str, ...]] = ()


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return _("never")
    return _("%(age)s ago") % {"age": format_age((now - at).total_seconds())}


# -- dead tuples and autovacuum of the queue tables ------------------------------------------


def judge_tables(rows: list[dict[str, Any]], now: datetime) -> Check:
    table = [
        (
            r["name"],
            grouped(r["live"]),
            grouped(r["dead"]),
            _when(r["vacuumed"], now),
            str(r["autovacuums"]),
        )
        for r in rows
    ]
    bloated = [r for r in rows if r["dead"] >= DEAD_TUPLES_WARN]
    warning = None
    if bloated:
        worst = max(bloated, key=lambda r: r["dead"])
        warning = _(
            "%(table)s has %(dead)s dead tuples (last vacuum %(vacuumed)s). Autovacuum is not "
            "keeping up, so claims wade through dead index entries and slow down. The usual "
            "cause is a long transaction or a replication slot holding back vacuum: see below."
        ) % {
            "table": worst["name"],
            "dead": grouped(worst["dead"]),
            "vacuumed": _when(worst["vacuumed"], now),
        }
    return Check(
        _("Dead tuples and autovacuum"),
        ngettext("%(n)d queue table read", "%(n)d queue tables read", len(rows)) % {"n": len(rows)},
        warning,
        (_("table"), _("live rows"), _("dead tuples"), _("last vacuum"), _("autovacuums")),
        table,
    )


# -- the oldest transaction, and the session that holds back vacuum --------------------------


def judge_sessions(rows: list[dict[str, Any]], with_sql: bool = True) -> Check:
    """The oldest transaction and the session holding back vacuum. The sessions' SQL text
    (other users' queries, with whatever literals they hold) only when `with_sql`."""
    oldest = rows[0] if rows and rows[0]["xact_age"] is not None else None
    holder = max(
        (r for r in rows if r["xmin_age"] is not None), key=lambda r: r["xmin_age"], default=None
    )
    table = [
        (
            str(r["pid"]),
            r["user"] or "",
            r["application"] or r["backend_type"] or "",
            r["state"] or "",
            format_age(r["xact_age"]) if r["xact_age"] is not None else "-",
            grouped(r["xmin_age"]) if r["xmin_age"] is not None else "-",
            r["query"] or "",
        )[: None if with_sql else -1]
        for r in rows[:5]
    ]
    if oldest is None:
        status = _("no open transaction")
    else:
        status = _("oldest transaction open %(age)s (pid %(pid)s)") % {
            "age": format_age(oldest["xact_age"]),
            "pid": oldest["pid"],
        }
    if holder is not None:
        status += _("; vacuum is held back by pid %(pid)s (%(xids)s xids)") % {
            "pid": holder["pid"],
            "xids": grouped(holder["xmin_age"]),
        }
    warning = None
    if oldest is not None and oldest["xact_age"] >= OLD_TRANSACTION_WARN:
        warning = _(
            "Session pid %(pid)s (%(user)s, %(application)s) has had a transaction open for "
            "%(age)s (%(state)s). Until it ends, vacuum cannot remove the rows the queue leaves "
            "behind. End it if it is stuck: SELECT pg_terminate_backend(%(pid)s);"
        ) % {
            "pid": oldest["pid"],
            "user": oldest["user"] or "?",
            "application": oldest["application"] or oldest["backend_type"] or "?",
            "age": format_age(oldest["xact_age"]),
            "state": oldest["state"],
        }
    headers = (_("pid"), _("user"), _("application"), pgettext("session", "state"),
               _("transaction age"), _("xmin age"), _("query"))  # fmt: skip
    return Check(
        _("Oldest transaction"), status, warning, headers[: None if with_sql else -1], table
    )


# -- replication slots that hold back xmin ---------------------------------------------------


def judge_slots(rows: list[dict[str, Any]]) -> Check:
    table = [
        (
            r["name"],
            r["type"],
            _("active") if r["active"] else _("inactive"),
            grouped(r["xmin_age"]) if r["xmin_age"] is not None else "-",
            grouped(r["catalog_xmin_age"]) if r["catalog_xmin_age"] is not None else "-",
        )
        for r in rows
    ]
    holding = [
        r
        for r in rows
        if r["xmin_age"] is not None and (not r["active"] or r["xmin_age"] >= SLOT_XMIN_AGE_WARN)
    ]
    warning = None
    if holding:
        slot = max(holding, key=lambda r: r["xmin_age"])
        warning = _(
            "Replication slot %(slot)s (%(state)s) holds xmin back by %(xids)s transactions, "
            "so vacuum cannot clean the queue tables. Reconnect its consumer, or drop the slot "
            "if nothing uses it: SELECT pg_drop_replication_slot('%(slot)s');"
        ) % {
            "slot": slot["name"],
            "state": _("active") if slot["active"] else _("inactive"),
            "xids": grouped(slot["xmin_age"]),
        }
    status = (
        ngettext("%(n)d replication slot", "%(n)d replication slots", len(rows)) % {"n": len(rows)}
        if rows
        else _("no replication slots")
    )
    return Check(
        _("Replication slots"),
        status,
        warning,
        (_("slot"), _("type"), pgettext("slot", "state"), _("xmin age"), _("catalog xmin age")),
        table,
    )


# -- jobs claimed by workers whose heartbeat is stale (any database) -------------------------


def fetch_claims(using: str, now: datetime) -> list[dict[str, Any]]:
    """Claimed jobs per claimer (index alkqueue_lease_idx holds only claimed rows)."""
    lapsed = Q(lease_expires_at__lte=now)
    claims = (
        QueueMessage.objects.using(using)
        .claimed()
        .values("claimed_by")
        .annotate(
            jobs=Count("id"),
            lapsed=Count("id", filter=lapsed),
            first_lapse=Min("lease_expires_at", filter=lapsed),
        )
        .order_by("claimed_by")
    )
    return [dict(claim) for claim in claims]


def judge_claims(
    claims: list[dict[str, Any]], heartbeats: dict[str, datetime], now: datetime
) -> Check:
    stale_after = get_settings().WORKER_STALE_AFTER
    table, stale_jobs, unreclaimed = [], 0, 0
    for c in claims:
        beat = heartbeats.get(c["claimed_by"])
        stale = beat is not None and (now - beat).total_seconds() > stale_after
        stale_jobs += c["jobs"] if stale else 0
        if (
            c["first_lapse"] is not None
            and (now - c["first_lapse"]).total_seconds() >= UNRECLAIMED_WARN
        ):
            unreclaimed += c["lapsed"]
        state = (
            _("no worker row")
            if beat is None
            else (pgettext("worker", "stale") if stale else pgettext("worker", "live"))
        )
        table.append(
            (
                c["claimed_by"],
                state,
                _when(beat, now) if beat else "-",
                str(c["jobs"]),
                str(c["lapsed"]),
            )
        )
    warnings = []
    if stale_jobs:
        text = ngettext(
            "%(n)d job is claimed by workers that stopped heartbeating. They go back to "
            "pending when their leases lapse and the leader reclaims them.",
            "%(n)d jobs are claimed by workers that stopped heartbeating. They go back to "
            "pending when their leases lapse and the leader reclaims them.",
            stale_jobs,
        )
        warnings.append(text % {"n": stale_jobs})
    if unreclaimed:
        text = ngettext(
            "%(n)d job is still claimed more than %(after)d s after the lease lapsed: no "
            "worker is reclaiming. Start a worker (any worker becomes leader).",
            "%(n)d jobs are still claimed more than %(after)d s after the lease lapsed: no "
            "worker is reclaiming. Start a worker (any worker becomes leader).",
            unreclaimed,
        )
        warnings.append(text % {"n": unreclaimed, "after": UNRECLAIMED_WARN})
    status = _("%(jobs)d claimed jobs held by %(claimers)d claimers") % {
        "jobs": sum(c["jobs"] for c in claims),
        "claimers": len(claims),
    }
    if len(table) > CLAIMERS_SHOWN:
        status += _("; the %(n)d holding the most are listed") % {"n": CLAIMERS_SHOWN}
        table = sorted(table, key=lambda row: -int(row[3]))[:CLAIMERS_SHOWN]
    return Check(
        _("Claims of stale workers"),
        status,
        " ".join(warnings) or None,
        (_("claimed by"), _("worker"), _("last heartbeat"), _("jobs"), _("lease lapsed")),
        table,
    )


def claims_check(using: str, now: datetime) -> Check:
    claims = fetch_claims(using, now)
    names = [c["claimed_by"] for c in claims]
    heartbeats = dict(
        Worker.objects.using(using)
        .filter(worker_id__in=names)
        .values_list("worker_id", "last_heartbeat_at")
    )
    return judge_claims(claims, heartbeats, now)


def judge_history_length(length: int | None) -> Check:
    title = _("InnoDB history list length")
    if length is None:
        return Check(title, _("not readable: the database user needs the PROCESS privilege"))
    warning = None
    if length >= HISTORY_LENGTH_WARN:
        warning = _(
            "%(n)s undo records wait for purge. A transaction left open holds them back, and "
            "scans of the queue table slow down while they pile up: find it in "
            "information_schema.INNODB_TRX (oldest trx_started) and end it."
        ) % {"n": grouped(length)}
    return Check(title, _("%(n)s undo records not yet purged") % {"n": grouped(length)}, warning)


def run_checks(using: str, now: datetime, session_sql: bool = False) -> list[Check]:
    """The catalog checks where the database keeps such statistics, then the claims check.
    Other sessions' SQL is shown only when `session_sql` (the view_session_sql permission)."""
    checks = []
    dialect = dialect_for(connections[using])
    if dialect.supports_undo_history:
        checks = [judge_history_length(dialect.undo_history_length(connections[using]))]
    if dialect.supports_catalog_health:
        connection = connections[using]
        checks = [
            judge_tables(dialect.queue_table_stats(connection), now),
            judge_sessions(dialect.open_sessions(connection), session_sql),
            judge_slots(dialect.replication_slots(connection)),
        ]
    return [*checks, claims_check(using, now)]
