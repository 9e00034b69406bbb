"""Errors Warp reports to agents.

Every refusal names the field it is about and the rule that was broken, so an
agent can correct its call; everything else that can go wrong (NATS down, a
slow server) is translated here into one clear sentence instead of a crash.
"""

from __future__ import annotations

import asyncio


class WarpError(Exception):
    """A refused operation. ``str()`` is what the agent sees."""

    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.message = f"{field}: {message}" if field and not message.startswith(f"{field}:") else message
        super().__init__(self.message)


class NotFound(WarpError):
    code = "not_found"


class Conflict(WarpError):
    code = "conflict"


class Unavailable(WarpError):
    """NATS is unreachable or Warp is not ready; the call may be retried."""

    code = "unavailable"


def describe(exc: BaseException, *, nats_url: str = "NATS") -> str | None:
    """The agent-facing text for an anticipated exception, or None for a real bug."""
    from pydantic import ValidationError

    from shared.names import InvalidNameError
    from shared.paging import CursorError
    from warp.config import ConfigError

    if isinstance(exc, WarpError):
        return exc.message
    if isinstance(exc, InvalidNameError | CursorError | ConfigError):
        return str(exc)
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
    try:
        from shared.registry import RegistryError
        from shared.work import WorkError
    except ImportError:  # pragma: no cover - both ship with the package
        return None
    if isinstance(exc, WorkError):
        return exc.message
    if isinstance(exc, RegistryError):
        return str(exc)
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
