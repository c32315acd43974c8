"""A PostgreSQL cluster of a bench script's own, started on a free port and removed after.

The machine's shared server (127.0.0.1:5432) allows 100 connections, and a worker process
holds about eight (its claim, ack, lease, presence, leader, statistics, status and LISTEN
loops each keep one), so 16 worker processes alone would need more than it has; other jobs
on the machine use it too, and it cannot be restarted with more. This cluster is the shared
one's configuration (PostgreSQL 15 of the machine, fsync on, shared_buffers 128 MB,
autovacuum off: the harness vacuums, bench/vacuum.py) with room for MAX_CONNECTIONS, and its
server processes are the children of one postmaster, so their CPU is this run's alone.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MAX_CONNECTIONS = 400
SETTINGS = {"max_connections": str(MAX_CONNECTIONS), "shared_buffers": "128MB",
            "autovacuum": "off", "fsync": "on", "listen_addresses": "127.0.0.1"}  # fmt: skip


@dataclass(frozen=True)
class Cluster:
    port: int
    #: The postmaster: its children are the cluster's server processes.
    pid: int

    @property
    def url(self) -> str:
        return f"postgres://root@127.0.0.1:{self.port}"


def _bin(program: str) -> str:
    """The newest installed PostgreSQL's `program` (Debian keeps them out of PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"))
    if not found:
        raise RuntimeError(f"no PostgreSQL {program} under /usr/lib/postgresql")
    return found[-1]


def _as_postgres(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def started() -> Iterator[Cluster]:
    """initdb, start, yield the running cluster, then stop it and remove its files."""
    directory = Path(tempfile.mkdtemp(prefix="alkqueue-bench-pg-"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    data, port = directory / "data", _free_port()
    subprocess.run(_as_postgres([_bin("initdb"), "-D", str(data), "-U", "root", "--auth=trust",
                                 "--no-sync"]), check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    options = " ".join(f"-c {k}={v}" for k, v in {**SETTINGS, "port": str(port)}.items())
    options += f" -c unix_socket_directories={directory}"
    subprocess.run(_as_postgres([_bin("pg_ctl"), "-D", str(data), "-o", options, "-w",
                                 "-l", str(directory / "log"), "start"]),
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield Cluster(port, pid)
    finally:
        subprocess.run(_as_postgres([_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                                     "stop"]), stdout=subprocess.DEVNULL)  # fmt: skip
        time.sleep(0.1)
        shutil.rmtree(directory, ignore_errors=True)
