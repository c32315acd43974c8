"""A real PgBouncer in transaction pooling mode, in front of the test run's PostgreSQL.

The Makefile installs Debian's pgbouncer (`make test` depends on it). Each use starts its own
process on a free port with its own config, and stops it afterwards. PgBouncer refuses to
run as root, so under root it drops to the `postgres` user (`-u`). `started()` needs neither
pytest nor Django's settings: the bench's scale-out run (bench/scale_out.py) starts its
PgBouncer with it too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {directory}/userlist.txt
logfile = {directory}/pgbouncer.log
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepting(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def pgbouncer() -> Iterator[int]:
    """Run a PgBouncer in transaction mode; yields its port. With a pool of one server
    connection, every transaction of every client runs on the same backend, so any
    session state a statement left behind would reach the next client."""
    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432)
    with started(host, port, db["USER"], pool_size=1) as listen_port:
        yield listen_port


@contextmanager
def started(host: str, port: int, user: str, pool_size: int) -> Iterator[int]:
    """A PgBouncer in transaction mode in front of PostgreSQL at host:port, letting `user`
    in without a password, with `pool_size` server connections per database and user;
    yields the port it listens on."""
    directory = Path(tempfile.mkdtemp(prefix="alkqueue-pgbouncer-"))
    listen_port = _free_port()
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(CONFIG.format(host=host, port=port, listen_port=listen_port,
                                    directory=directory, pool_size=pool_size))  # fmt: skip
    command = [PGBOUNCER, str(config)]
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
        for path in directory.iterdir():
            shutil.chown(path, "postgres")
        command = [PGBOUNCER, "-u", "postgres", str(config)]
    # Its log goes to the file as well; an unread pipe could fill and stall it.
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(process, listen_port, directory / "pgbouncer.log")
        yield listen_port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_for(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 15) -> None:
    """Until PgBouncer accepts connections on `port`; its log in the error if it exited."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and not _accepting(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"pgbouncer did not listen on {port} within {timeout:.0f}s")
        time.sleep(0.05)
    if process.poll() is not None:
        raise RuntimeError(f"pgbouncer exited:\n{log.read_text() if log.exists() else ''}")


def url(port: int) -> str:
    """The test database, through the PgBouncer on `port`."""
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@127.0.0.1:{port}/{db['NAME']}"
