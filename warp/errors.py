"""Errors Warp reports to agents.

Every refusal names the field it is about and the rule that was broken, so an
agent can correct its call; everything else that can go wrong (NATS down, a
slow server) is translated here into one clear sentence instead of a crash.
"""

from __future__ import annotations

import asyncio

from shared.errors import Conflict, Invalid, LoomError, NotFound, Unavailable

__all__ = ["Conflict", "NotFound", "Unavailable", "WarpError", "describe"]


class WarpError(Invalid):
    """A call Warp refuses by its own rules. ``message`` is what the agent sees."""


def describe(exc: BaseException, *, nats_url: str = "NATS") -> str | None:
    """The agent-facing text for an anticipated exception, or None for a real bug."""
    from pydantic import ValidationError

    from shared.errors import describe_problems, validation_problems

    if isinstance(exc, LoomError):
        return exc.message
    if isinstance(exc, ValidationError):
        return describe_problems(validation_problems(exc.errors(include_url=False)), limit=10)
    return _describe_nats(exc, nats_url)


def _describe_nats(exc: BaseException, nats_url: str) -> str | None:
    import nats.errors
    import nats.js.errors

    from shared.redact import redact

    retry = "Warp keeps reconnecting; retry in a few seconds."
    if isinstance(exc, nats.errors.TimeoutError | asyncio.TimeoutError | TimeoutError):
        return f"NATS at {nats_url} did not answer in time; the operation may not have happened. {retry}"
    if isinstance(
        exc,
        nats.errors.ConnectionClosedError
        | nats.errors.StaleConnectionError
        | nats.errors.OutboundBufferLimitError
        | nats.errors.NoRespondersError
        | nats.js.errors.ServiceUnavailableError,
    ):
        return f"NATS at {nats_url} is unreachable ({type(exc).__name__}). {retry}"
    if isinstance(exc, nats.js.errors.APIError):
        return redact(f"NATS refused the operation: {exc.description or exc}")
    return None
