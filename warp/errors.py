"""Errors Warp reports to agents.

Every refusal names the field it is about and the rule that was broken, so an
agent can correct its call; everything else that can go wrong (NATS down, a
slow server) is translated here into one clear sentence instead of a crash.
Each carries a code (``_meta["loom/error"].error`` of the tool result), so a
client can branch on it: the shared kinds (``invalid``, ``not_found``, ...),
``validation_error`` for arguments that break the schema, and the codes every
part gives the same NATS failures (``nats_unavailable``, ``jetstream_error``).
"""

from __future__ import annotations

from shared.errors import Conflict, Invalid, LoomError, NotFound, Unavailable

__all__ = ["Conflict", "NotFound", "Unavailable", "WarpError", "as_loom_error", "describe"]


class WarpError(Invalid):
    """A call Warp refuses by its own rules. ``message`` is what the agent sees."""


RETRY = "Warp keeps reconnecting; retry in a few seconds."
"""Warp's advice on a NATS failure that may pass (it reconnects by itself)."""


def as_loom_error(exc: BaseException, *, nats_url: str | None = None) -> LoomError | None:
    """An anticipated exception as the refusal the agent gets (code and message),
    or None for a real bug. NATS failures are classified by
    :func:`shared.nats.failures.nats_failure`, as in every part."""
    from pydantic import ValidationError

    from shared.errors import describe_problems, validation_problems
    from shared.mcp.toolerrors import VALIDATION_ERROR
    from shared.nats.failures import nats_failure

    found = nats_failure(exc, nats_url=nats_url, retry=RETRY)
    if found is not None:
        return found
    if isinstance(exc, LoomError):
        return exc
    if isinstance(exc, ValidationError):
        problems = validation_problems(exc.errors(include_url=False))
        return LoomError(describe_problems(problems, limit=10), code=VALIDATION_ERROR)
    return None


def describe(exc: BaseException, *, nats_url: str | None = None) -> str | None:
    """The agent-facing text for an anticipated exception, or None for a real bug."""
    found = as_loom_error(exc, nats_url=nats_url)
    return None if found is None else found.message
