"""How the worker reads the end of a process-pool child that ended mid-job: the text its
jobs' attempt fails with, and whether those jobs took it down themselves (a crash, counted
toward "crashed its worker": docs/reliability.md) or it was stopped from outside."""

from __future__ import annotations

import signal

#: The signals a process gets by crashing on its own: a segfault or a bus error in C code,
#: abort() (a failed assertion in a C library), a floating-point trap, an illegal
#: instruction. SIGKILL and SIGTERM are not among them: an operator, the OOM killer or the
#: pool itself (a time limit, a cancel) sends those, and the job is not to blame.
CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
)


def death_text(pid: int, exitcode: int | None, who: str = "child") -> str:
    """`child 1234 killed by SIGKILL`, `child 1234 exited with status 3`."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"{who} {pid} killed by {name}"
    return f"{who} {pid} exited with status {exitcode}"


def crashed_by_its_job(exitcode: int | None, own_exits: frozenset[int] = frozenset()) -> bool:
    """Whether a child that ended with `exitcode` (multiprocessing's and subprocess's: -N for
    signal N) while it ran a call was taken down by that call: an exit of its own
    (os._exit(n), any n but the process's `own_exits`) or one of CRASH_SIGNALS. A child
    serves calls until it is told to stop, so it never exits mid-call unless its handler (or
    C code under it) made it, or it exits with a status of its own."""
    if exitcode is None:  # still running after its pipe broke: not known to have crashed
        return False
    if exitcode >= 0:
        return exitcode not in own_exits
    return -exitcode in CRASH_SIGNALS
