"""Errors the memory service raises. Each message is safe to show an agent and,
where a caller's input caused it, names the field and the rule (never the value).

All derive from :class:`shared.errors.LoomError`, and each also from the shared
kind it is (``NotFound``, ``Forbidden``...), so code that handles Loom errors in
general handles these too."""

from __future__ import annotations

from shared.errors import Conflict, Forbidden, Invalid, LoomError, NotFound, Unavailable


class PatternError(LoomError):
    """A refusal of the memory service; ``field`` is the input field at fault, if any."""

    code = "error"


class InvalidInputError(PatternError, Invalid):
    code = "invalid"


class NotFoundError(PatternError, NotFound):
    code = "not_found"


class AccessDeniedError(PatternError, Forbidden):
    code = "forbidden"


class ProtectedMemoryError(PatternError, Forbidden):
    """A core memory is only changed with ``force``."""

    code = "protected"


class LimitExceededError(PatternError, Conflict):
    code = "limit_exceeded"


class SecretBlockedError(PatternError, Invalid):
    code = "secret_detected"


class UnavailableError(PatternError, Unavailable):
    """NATS is unreachable or the service is still starting."""

    code = "unavailable"
