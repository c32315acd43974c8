"""Wake-ups between the processes of one host, for databases without LISTEN/NOTIFY (SQLite,
MariaDB, MySQL): docs/worker.md, "How a worker hears of new jobs".

Each worker binds a Unix datagram socket in a directory named for its database (a digest of
the connection's ENGINE, NAME, HOST and PORT) under ALKQUEUE["WAKEUP_DIRECTORY"], the
system's temporary directory by default. An enqueue, once committed, sends the queue's name
to every socket there; the worker's listener hears it and claims at once. Nothing goes
through the database, so an idle worker costs no queries. A worker on another host hears
nothing and finds the job at its next poll (`--poll-interval`), as before.

A single enqueue outside a transaction sends nothing when its connection sent for the same
queue less than ALKQUEUE["NOTIFY_WINDOW"] seconds before, as on PostgreSQL
(sql/postgresql/wake_pacing.py): each woken worker looks again after the window.

Best effort by design: a socket that refuses (its worker died) is removed, a full one is
skipped (its worker has a wake-up waiting already), a directory that cannot be made or
written leaves polling as the way in.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import select
import socket
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

#: Per Django connection, per queue, the monotonic time its last single enqueue sent.
_LAST_SENT: weakref.WeakKeyDictionary[BaseDatabaseWrapper, dict[str, float]] = (
    weakref.WeakKeyDictionary()
)
#: The longest queue name a wake-up carries (queue names are far shorter: validation.py).
_MAX_DATAGRAM = 1024


def directory(connection: BaseDatabaseWrapper, root: str | None) -> Path:
    """The wake-up directory of `connection`'s database under `root` (None: the system's
    temporary directory). Every process that opens the same database names the same one."""
    settings = connection.settings_dict
    identity = "\0".join(str(settings.get(key) or "") for key in ("ENGINE", "NAME", "HOST", "PORT"))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(root or tempfile.gettempdir()) / f"alkqueue-wake-{digest}"


def wake(connection: BaseDatabaseWrapper, queue: str, root: str | None) -> None:
    """Wake the workers of this host for `queue` once the caller's transaction commits (at
    once in autocommit)."""
    path = directory(connection, root)
    transaction.on_commit(lambda: send(path, queue), using=connection.alias)


def wake_paced(
    connection: BaseDatabaseWrapper, queue: str, root: str | None, window: float
) -> None:
    """wake() for a single enqueue: in autocommit, nothing when this connection sent for
    `queue` less than `window` seconds ago."""
    if window <= 0 or not connection.get_autocommit():
        wake(connection, queue, root)
        return
    now = time.monotonic()
    sent = _LAST_SENT.setdefault(connection, {})
    if now - sent.get(queue, -window) < window:
        return
    sent[queue] = now
    send(directory(connection, root), queue)


def forget(connection: BaseDatabaseWrapper) -> None:
    """No wake-up sent on `connection` yet, as far as the window goes (tests start so)."""
    _LAST_SENT.pop(connection, None)


def send(path: Path, queue: str) -> int:
    """Send `queue` to every worker socket in `path`; returns how many took it."""
    try:
        entries = [entry.path for entry in os.scandir(path) if entry.name.endswith(".sock")]
    except OSError:
        return 0  # no worker of this host has bound one yet
    if not entries:
        return 0
    data = queue.encode()
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for entry in entries:
            try:
                sender.sendto(data, entry)
                sent += 1
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(entry)  # its worker is gone
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.EACCES, errno.EPERM):
                    raise
    return sent


@contextlib.contextmanager
def inbox(connection: BaseDatabaseWrapper, root: str | None) -> Iterator[_Wait]:
    """A socket of this process in the database's wake-up directory, for as long as the
    block runs; yields wait(timeout), the queue names heard within `timeout` seconds."""
    path = directory(connection, root)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    address = path / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        receiver.bind(str(address))
        receiver.setblocking(False)
        yield _Wait(receiver)
    finally:
        receiver.close()
        with contextlib.suppress(OSError):
            os.unlink(address)


class _Wait:
    """Waits on the inbox's socket: everything that arrived, once the first one did."""

    def __init__(self, receiver: socket.socket) -> None:
        self.receiver = receiver

    def __call__(self, timeout: float) -> list[str]:
        ready, _, _ = select.select([self.receiver], [], [], timeout)
        heard: list[str] = []
        while ready:
            try:
                data = self.receiver.recv(_MAX_DATAGRAM)
            except BlockingIOError:
                break
            heard.append(data.decode(errors="replace"))
        return heard
