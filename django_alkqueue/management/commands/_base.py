"""What every alk_* command does around its own work: before it starts, the database answers
and the app's migrations are applied; a database error while it runs ends it with one line on
stderr and a documented exit status, never a traceback (`-v 2` or `--traceback` print the
traceback before the line). The words and the exit statuses are alk_health's
(reports/health.py): 3 the database is unreachable or refuses, 4 migrations are unapplied
(docs/operations.md).
"""

from __future__ import annotations

import traceback
from typing import Any, NoReturn

from django.core.management.base import BaseCommand
from django.db import DatabaseError, connections
from django.utils.translation import gettext as _

from django_alkqueue.conf import get_settings
from django_alkqueue.reports import health

#: The app whose migrations a command needs.
APP_LABEL = "django_alkqueue"


class QueueCommand(BaseCommand):
    """A command on the queue's database: `run()` gets the alias (--database, else
    ALKQUEUE["DATABASE"]) once the database answers and the app's migrations are applied."""

    def run(self, using: str, **options: Any) -> None:
        raise NotImplementedError

    def execute(self, *args: Any, **options: Any) -> str | None:
        """Django's execute (the system checks, then handle), with a database error from
        either as one line: the system checks connect too (a JSONField asks SQLite and MySQL
        what they support)."""
        try:
            return super().execute(*args, **options)
        except DatabaseError as error:
            using = options.get("database") or get_settings().DATABASE
            self.fail(health.DATABASE_UNREACHABLE, database_line(using, error), error, options)

    def handle(self, *args: Any, **options: Any) -> None:
        using = options.get("database") or get_settings().DATABASE
        self.require_ready(using, options)
        self.run(using, **options)

    def require_ready(self, using: str, options: dict[str, Any]) -> None:
        """The database answers (a connection, as every command opens one first) and every
        migration of the app is applied (one read of django_migrations), else one line."""
        try:
            connections[using].ensure_connection()
        except Exception as error:  # whatever the driver raises, the database is what is wrong
            problem = health.unreachable(using, error)
            self.fail(problem.code, problem.message, error, options)
        unapplied = health.migration_problem(using, APP_LABEL)
        if unapplied is not None:
            migrate = "python manage.py migrate"
            if using != "default":
                migrate += f" --database {using}"
            text = _("%(problem)s; run `%(command)s`")
            self.fail(unapplied.code, text % {"problem": unapplied.message, "command": migrate})
        if connections[using].get_autocommit():
            # Not kept: a supervisor or a reloader that goes on to start the workers would
            # hold it idle for its life. The command's first query opens its own.
            connections[using].close()

    def fail(
        self,
        code: int,
        message: str,
        error: BaseException | None = None,
        options: dict[str, Any] | None = None,
    ) -> NoReturn:
        """End the command: the traceback first when asked for (-v 2, --traceback), then
        the one line, then exit status `code`."""
        options = options or {}
        if error is not None and (options.get("traceback") or options.get("verbosity", 1) >= 2):
            self.stderr.write("".join(traceback.format_exception(error)).rstrip())
        self.stderr.write(message)
        raise SystemExit(code)


def database_line(using: str, error: DatabaseError) -> str:
    """What a database error says on its line: alk_health's words when the database does
    not answer now, else the error, its first line."""
    unreachable = health.database_problem(using)
    if unreachable is not None:
        return unreachable.message
    first_line = str(error).strip().split("\n", 1)[0]
    text = _("database %(using)r error: %(error)s: %(detail)s")
    return text % {"using": using, "error": type(error).__name__, "detail": first_line}
