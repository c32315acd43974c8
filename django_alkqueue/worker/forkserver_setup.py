"""Imported once by the process pool's fork server (process_pool.py) before it forks any
child: Django is set up here, so every child forks with the settings, the apps and the
consumers loaded. A connection set-up opened is closed here, in the process that opened it,
so that no child inherits one: each opens its own on its first query."""

from __future__ import annotations

import logging

try:
    import django
    from django.apps import apps
    from django.db import connections

    if not apps.ready:
        django.setup()
    connections.close_all()
except (
    Exception
):  # the fork server must start all the same: each child then sets up and fails there
    logging.getLogger("django_alkqueue").exception(
        "the process pool's fork server could not set up Django"
    )
