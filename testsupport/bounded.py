"""A test coroutine that ends within a bound, and says where it waited when it does not.

pytest-timeout's report shows threads, not the coroutine a test is stuck in; an
``asyncio.timeout`` inside the test raises at the await that never returned, so the
failure's traceback names it; and where every other task of the loop waited at that
moment is added to the failure as a note (a test that waits on a task it started shows
that task's await). The bound is a liveness limit for a hang, not a speed figure: keep it
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
            loop = asyncio.get_running_loop()
            waits: list[str] = []
            snapshot = loop.call_at(loop.time() + seconds * 0.999, lambda: waits.extend(_waits()))
            try:
                async with asyncio.timeout(seconds):
                    return await test(*args, **kwargs)
            except TimeoutError as exc:
                exc.add_note("where the loop's tasks waited at the bound:\n" + "\n".join(waits))
                raise
            finally:
                snapshot.cancel()

        return run

    return wrap


def _waits() -> list[str]:
    """Each pending task of the running loop and the awaits it is suspended in, outermost
    first (its coroutine's ``cr_await`` chain, which a task's own stack does not show)."""
    found = []
    for task in asyncio.all_tasks():
        lines = [f"{task.get_name()}:"]
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is None:
                lines.append(f"  waits on {awaited!r}"[:300])
                break
            lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        found.append("\n".join(lines))
    return found


def bound_module_tests(namespace: dict[str, Any], seconds: float) -> None:
    """:func:`bounded` on every ``test_*`` coroutine of a module (call at its end with ``globals()``)."""
    for name, value in list(namespace.items()):
        if name.startswith("test_") and inspect.iscoroutinefunction(value):
            namespace[name] = bounded(seconds)(value)
