"""Errors the memory service raises. Each message is safe to show an agent and,
where a caller's input caused it, names the field and the rule."""

from __future__ import annotations


class PatternError(Exception):
    """Base class; ``field`` is the input field at fault, if any."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class InvalidInputError(PatternError):
    code = "invalid_input"


class NotFoundError(PatternError):
    code = "not_found"


class AccessDeniedError(PatternError):
    code = "access_denied"


class ProtectedMemoryError(PatternError):
    code = "protected"


class LimitExceededError(PatternError):
    code = "limit_exceeded"


class SecretBlockedError(PatternError):
    code = "secret_detected"


class UnavailableError(PatternError):
    """NATS is unreachable or the service is still starting."""

    code = "unavailable"
