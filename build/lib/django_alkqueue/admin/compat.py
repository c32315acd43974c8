"""The one place that knows Django 6.1's detail-page actions (`ActionLocation`). On Django
5.2 LTS actions run from the changelist only, and the 6.1-only action options are dropped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin

try:
    from django.contrib.admin import ActionLocation
except ImportError:  # Django 5.2
    ActionLocation = None  # type: ignore[assignment,misc]

DETAIL_PAGE_ACTIONS = ActionLocation is not None

#: Actions offered on the changelist and on the detail page of one object (Django 6.1).
BOTH_PLACES: Any = (
    [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM] if DETAIL_PAGE_ACTIONS else None
)
#: The POST fields a detail-page action form sends (never sent before Django 6.1).
_FORM_PREFIX = ActionLocation.CHANGE_FORM.value if DETAIL_PAGE_ACTIONS else "CHANGE_FORM"
FORM_ACTION = f"{_FORM_PREFIX}-action"
FORM_SELECT_ACROSS = f"{_FORM_PREFIX}-select_across"


def action(**options: Any) -> Callable[[Any], Any]:
    """`admin.action`, without `location` and `description_plural` where Django lacks them.
    There, actions run from the changelist only, on the selected rows: the plural wording is
    the one that fits, so it becomes the description."""
    if not DETAIL_PAGE_ACTIONS:
        options.pop("location", None)
        plural = options.pop("description_plural", None)
        if plural is not None:
            options["description"] = plural
    return admin.action(**options)  # type: ignore[no-any-return]


def detail_page_actions(model_admin: admin.ModelAdmin[Any], request: Any) -> dict[str, Any]:
    """The actions a detail page offers (none before Django 6.1)."""
    if not DETAIL_PAGE_ACTIONS:
        return {}
    return model_admin.get_actions(request, action_location=ActionLocation.CHANGE_FORM)
