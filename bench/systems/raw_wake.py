"""The raw loops' wake-up on databases without NOTIFY (MariaDB, SQLite): what the raw psycopg
loop does with LISTEN / NOTIFY, done with this host's Unix datagram sockets, the way
django-alkqueue's workers wake there (docs/worker.md, "Wake-ups without NOTIFY").

Each raw worker binds a socket in a directory named for its database; an enqueue that wants
the workers awake (the pickup-latency run, a drain's seed) sends one empty datagram to each
socket there once its transaction has committed. An idle worker waits on its socket for 1 s
at most, then looks again: polling stays the safety net, as in the raw psycopg loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import tempfile
from pathlib import Path


def directory(database: str) -> Path:
    """The sockets' directory of one database (a digest of its name: short enough for a
    socket's path)."""
    digest = hashlib.sha256(database.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"bench-raw-wake-{digest}"


def bind(database: str) -> socket.socket:
    """This worker's socket in its database's directory (removed by `unbind`)."""
    where = directory(database)
    where.mkdir(exist_ok=True)
    path = where / str(os.getpid())
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    return sock


def remove(database: str) -> None:
    """The sockets' directory of `database`, once no worker's socket is left in it."""
    with contextlib.suppress(OSError):
        directory(database).rmdir()


def unbind(sock: socket.socket) -> None:
    path = sock.getsockname()
    sock.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


def wait(sock: socket.socket, timeout: float = 1.0) -> None:
    """Until a datagram comes (then any others queued behind it are read too) or `timeout`."""
    sock.settimeout(timeout)
    with contextlib.suppress(TimeoutError):
        sock.recv(16)
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                sock.recv(16)


def send(database: str) -> None:
    """One datagram to each worker socket of `database` (a gone worker's socket is skipped)."""
    where = directory(database)
    if not where.is_dir():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for path in where.iterdir():
            with contextlib.suppress(OSError):
                sock.sendto(b"", str(path))
