"""PayloadField: a JSONField stored as JSON text, so values round-trip exactly.

jsonb rewrites numbers (1e308 comes back as an int) and refuses "\\u0000"; text keeps what
`json.dumps` wrote, costs no parsing on insert, and the queue never queries inside payloads.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from . import payload as payload_codec


class PayloadField(models.JSONField):
    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        # Django's own text type: "text" on PostgreSQL and SQLite, "longtext" on MySQL and
        # MariaDB, whose "text" stops at 64 KiB (MAX_PAYLOAD_BYTES goes to 1 GiB).
        return str(models.TextField().db_type(connection))

    def db_check(self, connection: BaseDatabaseWrapper) -> None:
        return None

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        return payload_codec.encode(value, max_bytes=2**31)

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        if hasattr(value, "as_sql"):
            return value  # an expression: the ORM dialect writes text it already encoded
        return self.get_db_prep_value(value, connection)
