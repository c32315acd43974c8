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
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=_outside())


def _outside() -> int:
    """The stacklevel, for a warning raised in moved(), of the first frame outside _SKIPPED:
    what warn()'s skip_file_prefixes does from Python 3.12, which the Django 5.2 run on 3.11
    does not have."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # moved()
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame = frame.f_back
        if frame is not None and not _import_machinery(frame.f_code.co_filename):
            level += 1  # warn() counts no frame of the import machinery's bootstrap
    return level


def _import_machinery(filename: str) -> bool:
    """The frames warn() passes over by itself when it counts stacklevel."""
    return "importlib" in filename and "_bootstrap" in filename
