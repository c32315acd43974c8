"""A network namespace joined to this host by a veth pair, with PostgreSQL listening on the
host end, for the partition scenario. Everything it changes is undone on the way out, in
reverse order, whatever happened in between:

1. `ip netns add`, `ip link add ... type veth`, addresses from 10.213.37.0/30 (a private
   range; refused if this host already uses it);
2. a pg_hba.conf line trusting only the namespace's address for the test database and user
   (the file is restored byte for byte, then reloaded);
3. `ALTER SYSTEM SET listen_addresses` = the current value plus the host end, and a restart
   (restored with ALTER SYSTEM RESET, or SET to the previous ALTER SYSTEM value, then a
   second restart).

`Link.cut()` sets the host end down, `Link.restore()` sets it up again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection, connections
from psycopg import sql

SUBNET = ipaddress.ip_network("10.213.37.0/30")
HOST_ADDRESS, NS_ADDRESS = (str(a) for a in SUBNET.hosts())
HBA_MARK = "# alkqueue chaos partition test"


@dataclasses.dataclass
class Link:
    namespace: str
    host_interface: str
    host_address: str
    ns_address: str

    def cut(self) -> None:
        _ip("link", "set", self.host_interface, "down")

    def restore(self) -> None:
        _ip("link", "set", self.host_interface, "up")

    def prefix(self) -> list[str]:
        """The command prefix that runs a process inside the namespace."""
        return ["ip", "netns", "exec", self.namespace]


def _ip(*args: str, namespace: str | None = None) -> None:
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=30)


def _admin_connection() -> psycopg.Connection:
    """A superuser session on the local cluster's maintenance database, over 127.0.0.1."""
    db = connection.settings_dict
    return psycopg.connect(
        host="127.0.0.1",
        port=int(db.get("PORT") or 5432),
        user=db["USER"],
        dbname="postgres",
        autocommit=True,
        connect_timeout=5,
    )


def _admin(statement: str | sql.Composed) -> list[tuple[object, ...]]:
    with _admin_connection() as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _wait_for_server(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _admin("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _clean_leftovers(restart: list[str]) -> None:
    """Undo what a run killed before its cleanup left behind (its namespace, its veth pair,
    its pg_hba.conf line, its listen address), so that one crash does not skip every later
    run."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        tag = name.removeprefix("alkchaos")
        if name.startswith("alkchaos") and tag.isdigit() and not _alive(int(tag)):
            subprocess.run(["ip", "link", "del", f"alkh{tag}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    hba = Path(str(_admin("SHOW hba_file")[0][0]))
    lines = hba.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if HBA_MARK.encode() not in line]
    if kept != lines:
        hba.write_bytes(b"".join(kept))
        _admin("SELECT pg_reload_conf()")
    ((current, source),) = _admin(
        "SELECT setting, coalesce(sourcefile, '') FROM pg_settings WHERE name = 'listen_addresses'"
    )
    addresses = [a.strip() for a in str(current).split(",")]
    if HOST_ADDRESS in addresses and str(source).endswith("postgresql.auto.conf"):
        _admin(_set_listen(",".join(a for a in addresses if a != HOST_ADDRESS)))
        _restart(restart)


def _alive(pid: int) -> bool:
    """Whether a process with this pid tag (pid modulo 100,000) may still run."""
    return any(int(p) % 100_000 == pid for p in os.listdir("/proc") if p.isdigit())


def _skip_unless_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if not shutil.which("ip"):
        pytest.skip("needs iproute2 (the `ip` command)")


def _skip_if_subnet_taken() -> None:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    if any(str(address) in used + routes for address in SUBNET):
        pytest.skip(f"{SUBNET} is already in use on this host")


@contextlib.contextmanager
def partitionable_link(restart: list[str]) -> Iterator[Link]:
    """The namespace, the veth pair and PostgreSQL listening on the host end; all undone after.

    `restart` is the pg_ctlcluster command that restarts the local cluster."""
    _skip_unless_root()
    _clean_leftovers(restart)
    _skip_if_subnet_taken()
    tag = str(os.getpid() % 100_000)
    link = Link(f"alkchaos{tag}", f"alkh{tag}", HOST_ADDRESS, NS_ADDRESS)
    undo: list[Callable[[], None]] = []
    try:
        try:
            _ip("netns", "add", link.namespace)
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create a network namespace here: {exc.stderr.strip()}")
        undo.append(lambda: _ip("netns", "del", link.namespace))
        inner = f"alkn{tag}"
        _ip("link", "add", link.host_interface, "type", "veth", "peer", "name", inner)
        undo.append(lambda: _ip("link", "del", link.host_interface))  # takes its peer along
        _ip("link", "set", inner, "netns", link.namespace)
        _ip("addr", "add", f"{HOST_ADDRESS}/{SUBNET.prefixlen}", "dev", link.host_interface)
        _ip("link", "set", link.host_interface, "up")
        _ip(
            "addr",
            "add",
            f"{NS_ADDRESS}/{SUBNET.prefixlen}",
            "dev",
            inner,
            namespace=link.namespace,
        )
        _ip("link", "set", inner, "up", namespace=link.namespace)
        _ip("link", "set", "lo", "up", namespace=link.namespace)
        _trust_namespace_in_pg_hba(undo)
        _listen_on_host_end(restart, undo)
        yield link
    finally:
        _run_all(reversed(undo))


def _run_all(steps: Iterator[Callable[[], None]]) -> None:
    """Run every undo step even if some fail; raise the first failure at the end."""
    errors: list[BaseException] = []
    for step in steps:
        try:
            step()
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def _trust_namespace_in_pg_hba(undo: list[Callable[[], None]]) -> None:
    hba = Path(str(_admin("SHOW hba_file")[0][0]))
    original = hba.read_bytes()

    def restore() -> None:
        hba.write_bytes(original)
        _admin("SELECT pg_reload_conf()")

    undo.append(restore)
    db = connection.settings_dict
    line = f"host {db['NAME']} {db['USER']} {NS_ADDRESS}/32 trust {HBA_MARK}\n"
    hba.write_bytes(original + (b"" if original.endswith(b"\n") else b"\n") + line.encode())
    _admin("SELECT pg_reload_conf()")


def _listen_on_host_end(restart: list[str], undo: list[Callable[[], None]]) -> None:
    ((current, source),) = _admin(
        "SELECT setting, coalesce(sourcefile, '') FROM pg_settings WHERE name = 'listen_addresses'"
    )
    previous = current if str(source).endswith("postgresql.auto.conf") else None

    def restore() -> None:
        if previous is None:
            _admin("ALTER SYSTEM RESET listen_addresses")
        else:
            _admin(_set_listen(str(previous)))
        _restart(restart)

    undo.append(restore)
    _admin(_set_listen(f"{current},{HOST_ADDRESS}"))
    _restart(restart)


def _set_listen(value: str) -> sql.Composed:
    return sql.SQL("ALTER SYSTEM SET listen_addresses = {}").format(sql.Literal(value))


def _restart(restart: list[str]) -> None:
    subprocess.run(restart, check=True, capture_output=True, timeout=120)
    connections.close_all()  # the test's own connection died with the server
    _wait_for_server()
