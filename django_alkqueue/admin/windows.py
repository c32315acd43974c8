"""A job's unique window on its detail pages (live job, dead letter, finished job): when the
enqueue with `unique_for` took its key, and when the key is free again (docs/admin.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..models import UniqueWindow
from .times import timestamp


class UniqueWindowField(admin.ModelAdmin):  # type: ignore[type-arg]
    """The readonly field `unique_window`: the window this row's job took for its unique key,
    while the window is kept (the leader's sweep deletes it once lapsed)."""

    #: The attribute holding the row's job id (a live job's is its primary key).
    job_id_field = "job_id"

    @admin.display(description=gettext_lazy("unique window"))
    def unique_window(self, row: Any) -> str:
        if not row.unique_key:
            return "-"
        window = (
            UniqueWindow.objects.using(row._state.db)
            .filter(queue=row.queue, unique_key=row.unique_key)  # alkqueue_unique_window_key
            .filter(job_id=getattr(row, self.job_id_field))
            .first()
        )
        if window is None:
            return "-"
        return _("taken %(taken)s, held until %(lapses)s") % {
            "taken": timestamp(window.taken_at),
            "lapses": timestamp(window.lapses_at),
        }
