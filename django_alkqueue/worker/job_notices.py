"""The pipe on which a worker process run by the `--processes` supervisor tells it which jobs
its handlers are running, so that the supervisor can count a crash for them when a handler
takes the whole process down (docs/reliability.md#what-a-handler-cannot-do-to-its-worker).

A line per job: `started <job id> <claim token>` before its handler is called, `ended <job
id> <claim token>` after it returns or raises. The worker never waits for the supervisor:
the pipe is non-blocking, each write is whole lines of at most PIPE_BUF bytes (atomic, so
the handler threads' lines never interleave), and a write that finds the pipe full or gone
is dropped. No database statement on either side until a process dies.
"""

from __future__ import annotations

import contextlib
import os
import select
import uuid
from collections.abc import Iterable, Iterator

from ..sql import Claim


class NoNotices:
    """A worker without a supervisor (or in the process pool, whose children count their
    own crashes): nobody to tell."""

    def started(self, claims: list[Claim]) -> None:
        """Nothing to say."""

    def ended(self, claims: list[Claim]) -> None:
        """Nothing to say."""


class JobNotices(NoNotices):
    """The worker's end of the pipe: file descriptor `fd`, passed by the supervisor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)  # not for the handlers' own subprocesses

    def started(self, claims: list[Claim]) -> None:
        self._write(b"started", claims)

    def ended(self, claims: list[Claim]) -> None:
        self._write(b"ended", claims)

    def _write(self, word: bytes, claims: list[Claim]) -> None:
        for chunk in _chunks(b"%s %d %s\n" % (word, c.id, c.token.hex.encode()) for c in claims):
            # Full (BlockingIOError) or the supervisor gone (EPIPE): dropped, and the job's
            # lease still brings it back after a crash (docs/reliability.md).
            with contextlib.suppress(OSError):
                os.write(self.fd, chunk)


def _chunks(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Whole lines joined up to PIPE_BUF bytes: each chunk is written atomically."""
    chunk = b""
    for line in lines:
        if chunk and len(chunk) + len(line) > select.PIPE_BUF:
            yield chunk
            chunk = b""
        chunk += line
    if chunk:
        yield chunk


class StartedJobs:
    """The supervisor's end of one worker process's pipe: the claims whose handlers that
    process started and has not ended, as far as it told."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.running: set[Claim] = set()
        self._partial = b""
        #: The worker's end was closed: everything it wrote has been read.
        self.at_end = False

    def read(self) -> None:
        """Take in what the worker wrote since the last read, without waiting."""
        while not self.at_end:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not data:
                self.at_end = True
                return
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self._take(line)

    def _take(self, line: bytes) -> None:
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit():
            return  # not a line this module writes
        try:
            claim = Claim(int(parts[1]), uuid.UUID(hex=parts[2].decode("ascii")))
        except ValueError:
            return
        if parts[0] == b"started":
            self.running.add(claim)
        elif parts[0] == b"ended":
            self.running.discard(claim)

    def close(self) -> set[Claim]:
        """The process has exited: read the rest of what it wrote, close our end, and return
        the claims it was running when it died."""
        self.read()
        os.close(self.fd)
        return self.running
