"""The map in worker/__init__.py names every module of the package, one line each."""

from __future__ import annotations

import re
from pathlib import Path

import django_alkqueue.worker as worker


def test_the_worker_package_map_lists_every_module_once():
    modules = sorted(p.name for p in Path(worker.__file__).parent.glob("*.py"))
    listed = re.findall(r"^(\w+\.py) ", worker.__doc__ or "", re.MULTILINE)
    assert sorted(listed) == [m for m in modules if m != "__init__.py"]
