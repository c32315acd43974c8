"""`alk_worker --reload`, for development: the worker restarts when a Python file changes.

Django's autoreloader (`django.utils.autoreload.run_with_reloader`, the one `runserver` uses)
watches every module this process imported, the consumers modules included (the app's
`ready()` imported them). It runs its function in a thread, and a worker needs the main
thread for its signal handlers, so the function starts the worker as a child process with the
same arguments less `--reload`, and stops it gracefully (SIGTERM, then the worker's own
shutdown) before each restart.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys

from django.utils import autoreload

logger = logging.getLogger("django_alkqueue")

#: Seconds a worker gets to finish its shutdown after SIGTERM before a reload kills it.
STOP_GRACE = 30.0


def worker_command(argv: list[str]) -> list[str]:
    """The worker's command line: this command's arguments without `--reload`."""
    arguments = [a for a in argv[2:] if a != "--reload"]
    return [sys.executable, "-m", "django", "alk_worker", *arguments]


def run_with_reload(argv: list[str]) -> None:
    autoreload.run_with_reloader(_serve, worker_command(argv))


def _serve(command: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen(command, env=env)
    atexit.register(_stop, child)
    code = child.wait()
    logger.warning("the worker exited with %s; it starts again when a file changes", code)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
