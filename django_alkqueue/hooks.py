"""The hooks through which the core calls code above it, which registers them: the core
never imports its users (docs/architecture.md).

- `run_on_commit`: what an enqueue calls when ALKQUEUE["RUN_ON_COMMIT"] is on; testing.py
  registers it when imported, which the app's ready() does.

The other one is workflows/specs.py's `register_sender`: how a JobSpec is sent, which
queues.py registers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.core.exceptions import ImproperlyConfigured

from .jobs import Job

#: Called with the jobs an enqueue wrote (none waiting) and the database alias.
RunOnCommit = Callable[[Sequence[Job], str], None]

_run_on_commit: list[RunOnCommit] = []


def register_run_on_commit(hook: RunOnCommit) -> None:
    """Make `hook` what RUN_ON_COMMIT runs (registered again: replaced)."""
    _run_on_commit[:] = [hook]


def run_on_commit(jobs: Sequence[Job], using: str) -> None:
    """RUN_ON_COMMIT's hook, called by Queue's enqueues when the setting is on."""
    if not _run_on_commit:
        raise ImproperlyConfigured(
            'ALKQUEUE["RUN_ON_COMMIT"] is on but django_alkqueue.testing was never imported: '
            'add "django_alkqueue" to INSTALLED_APPS (its ready() imports it)'
        )
    _run_on_commit[0](jobs, using)
