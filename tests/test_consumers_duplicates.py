"""One consumer per queue, also when two handlers share a dotted path: only the same function
(the same object, or the same definition re-created by a re-import of its module) may be
registered twice. Modules are compiled from source here, into a registry of the test's own."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_alkqueue import RetryPolicy
from django_alkqueue.consumers import ConsumerRegistry, ConsumerSpec, handler_path

ONE_HANDLER = """
def handler(payload, job):
    return "first"
"""

TWO_HANDLERS_ONE_NAME = """
def handler(payload, job):
    return "first"

first = handler


def handler(payload, job):
    return "second"
"""


def load(source: str, name: str = "shop.consumers") -> types.ModuleType:
    """Import `source` as module `name`, as a fresh import (or a re-import) would."""
    module = types.ModuleType(name)
    exec(compile(source, f"/srv/app/{name.replace('.', '/')}.py", "exec"), module.__dict__)
    return module


def spec_of(handler: Callable[..., Any], queue: str = "shop-emails") -> ConsumerSpec:
    return ConsumerSpec(queue=queue, handler=handler, path=handler_path(handler), lease=None,
                        max_attempts=None, retry=RetryPolicy(), atomic=False)  # fmt: skip


def two_nested_handlers() -> tuple[Callable[..., Any], Callable[..., Any]]:
    def handler(payload: Any, job: Any) -> str:
        return "first"

    first = handler

    def handler(payload: Any, job: Any) -> str:  # the same name again: the point of the test
        return "second"

    return first, handler


def test_the_same_function_registered_twice_is_one_consumer():
    registry = ConsumerRegistry()
    module = load(ONE_HANDLER)

    registry.register(spec_of(module.handler))
    registry.register(spec_of(module.handler))

    assert registry.get("shop-emails").handler is module.handler


def test_a_handler_re_created_by_a_re_import_of_its_module_replaces_itself():
    registry = ConsumerRegistry()
    before, after = load(ONE_HANDLER), load(ONE_HANDLER)

    registry.register(spec_of(before.handler))
    registry.register(spec_of(after.handler))

    assert registry.get("shop-emails").handler is after.handler


def test_two_functions_defined_under_one_name_in_one_module_are_two_consumers():
    registry = ConsumerRegistry()
    module = load(TWO_HANDLERS_ONE_NAME)
    registry.register(spec_of(module.first))

    with pytest.raises(ImproperlyConfigured, match="two consumers") as info:
        registry.register(spec_of(module.handler))

    message = str(info.value)
    assert "shop.consumers.handler (/srv/app/shop/consumers.py:2)" in message
    assert "shop.consumers.handler (/srv/app/shop/consumers.py:8)" in message
    assert registry.get("shop-emails").handler is module.first


def test_two_nested_functions_with_one_qualified_name_are_two_consumers():
    registry = ConsumerRegistry()
    first, second = two_nested_handlers()
    assert handler_path(first) == handler_path(second)  # both ...<locals>.handler
    registry.register(spec_of(first))

    with pytest.raises(ImproperlyConfigured, match=r"two_nested_handlers\.<locals>\.handler"):
        registry.register(spec_of(second))
