"""The old paths of modules that moved: each is a thin alias of its new module that warns once,
when it is first imported (docs/architecture.md, "reports/")."""

from __future__ import annotations

import importlib
import inspect
import os
import warnings

#: Frames the warning passes over to reach the import that named the old path: the library's
#: own (the alias, this module) and the import machinery's.
_SKIPPED = (
    os.path.dirname(__file__) + os.sep,
    os.path.dirname(inspect.getfile(importlib)) + os.sep,
    "<frozen importlib",
)


def moved(old: str, new: str) -> None:
    """Warn that the module `old` is deprecated and lives at `new` now."""
    warnings.warn(
        f"{old} is deprecated; use {new}", DeprecationWarning, skip_file_prefixes=_SKIPPED
    )
