"""A bench script's Django: its settings on a database URL, its tables migrated. Apart from
bench/common.py, which imports the harness's tools, so that a script's `--url` runs from the
project's venv too."""

from __future__ import annotations

import os


def setup_django(url: str, settings: str) -> None:
    """This process's Django on the database at `url` with `settings`, its tables migrated."""
    os.environ["BENCH_DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
