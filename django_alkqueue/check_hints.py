"""The system checks' ids and how to fix each (docs/checks.md says more under the id's
heading): what checks.py and admin_site.py build their messages with. Imports no model, as
admin_site.py is imported before the models can be."""

from __future__ import annotations

from django.core import checks

#: How to fix each check's errors; docs/checks.md says more under the id's heading.
HINTS = {
    "alkqueue.E001": "Give each queue exactly one @consumer.",
    "alkqueue.E002": "Fix the entry's cron, queue or task.",
    "alkqueue.E003": "Fix the named key of the ALKQUEUE setting.",
    "alkqueue.E004": "Name an alias of DATABASES.",
    "alkqueue.E005": "Set the queue's limits in one place: the @consumer or ALKQUEUE['QUEUES'].",
    "alkqueue.E101": "Use PostgreSQL, SQLite, MariaDB 10.6+ or MySQL 8.0.1+.",
    "alkqueue.E102": 'Add "django_alkqueue" to INSTALLED_APPS.',
    "alkqueue.E103": 'Add "django_alkqueue" to INSTALLED_APPS, then run `manage.py migrate`.',
    "alkqueue.W101": 'Add "PRAGMA journal_mode=WAL;" to the database\'s OPTIONS["init_command"].',
    "alkqueue.W102": "Run the CREATE INDEX statement the message shows.",
}


def hint(check_id: str) -> str:
    anchor = check_id.replace(".", "").lower()
    return f"{HINTS[check_id]} See docs/checks.md#{anchor}."


def error(message: str, check_id: str) -> checks.Error:
    return checks.Error(message, hint=hint(check_id), id=check_id)
