"""A test coroutine that ends within a bound, and says where it waited when it does not.

pytest-timeout's report shows threads, not the coroutine a test is stuck in; an
``asyncio.timeout`` inside the test raises at the await that never returned, so the failure's
traceback names it. The bound is a liveness limit for a hang, not a speed figure: keep it
under the test's pytest-timeout and far above what the test needs on a loaded machine."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any


def bounded(seconds: float) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    def wrap(test: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        assert inspect.iscoroutinefunction(test), test

        @functools.wraps(test)
        async def run(*args: Any, **kwargs: Any) -> Any:
            async with asyncio.timeout(seconds):
                return await test(*args, **kwargs)

        return run

    return wrap


def bound_module_tests(namespace: dict[str, Any], seconds: float) -> None:
    """:func:`bounded` on every ``test_*`` coroutine of a module (call at its end with ``globals()``)."""
    for name, value in list(namespace.items()):
        if name.startswith("test_") and inspect.iscoroutinefunction(value):
            namespace[name] = bounded(seconds)(value)
