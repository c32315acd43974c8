"""Connection hygiene for long-lived worker threads.

Django's close_old_connections() closes every connection when CONN_MAX_AGE is 0 (the
default), which is right at the end of a web request but would make a worker reconnect for
every job. A worker is one long request: it keeps healthy connections, closes broken ones at
once, and honours CONN_MAX_AGE when it is set above 0.
"""

from __future__ import annotations

from django.db import connections


def recycle_connections() -> None:
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or connection.in_atomic_block:
            continue
        if connection.settings_dict.get("CONN_MAX_AGE") == 0:
            if connection.errors_occurred:
                if connection.is_usable():
                    connection.errors_occurred = False
                else:
                    connection.close()
        else:
            connection.close_if_unusable_or_obsolete()


def ages_connections() -> bool:
    """Whether any alias sets CONN_MAX_AGE above 0 (or None): only then can a connection go
    stale while its thread waits for the next job. With 0 everywhere, the check after each
    job leaves nothing for a check before the next one to find."""
    return any(s.get("CONN_MAX_AGE", 0) != 0 for s in connections.settings.values())
