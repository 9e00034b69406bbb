"""Errors the memory service raises. Each message is safe to show an agent and,
where a caller's input caused it, names the field and the rule (never the value).

All derive from :class:`shared.errors.LoomError`, and each also from the shared
kind it is (``NotFound``, ``Forbidden``...), so code that handles Loom errors in
general handles these too. Their codes (``error`` in a tool error's structured
content) are the TypeScript Pattern's where the meaning is the same
(``MEMORY_NOT_FOUND``, ``ACCESS_DENIED``, ``CORE_PROTECTED``, ...), so a client
written for it branches the same way; docs/architecture.md lists them all."""

from __future__ import annotations

from shared.errors import Conflict, Forbidden, Invalid, LoomError, NotFound, Unavailable


class PatternError(LoomError):
    """A refusal of the memory service; ``field`` is the input field at fault, if any."""

    code = "PATTERN_ERROR"


class InvalidInputError(PatternError, Invalid):
    code = "VALIDATION_ERROR"


class InvalidCategoryError(InvalidInputError):
    """A category that the memory's scope does not allow (core outside private/personal)."""

    code = "INVALID_CATEGORY"


class NotFoundError(PatternError, NotFound):
    code = "MEMORY_NOT_FOUND"


class AccessDeniedError(PatternError, Forbidden):
    code = "ACCESS_DENIED"


class ProtectedMemoryError(PatternError, Forbidden):
    """A core memory is only forgotten with ``force``, and never promoted or shared."""

    code = "CORE_PROTECTED"


class LimitExceededError(PatternError, Conflict):
    code = "STORAGE_FULL"


class SecretBlockedError(PatternError, Invalid):
    """``PATTERN_SECRET_SCAN=block`` refused content that looks like a secret."""

    code = "SECRET_DETECTED"


class ChangedError(PatternError, Conflict):
    """Another writer changed the memory between reading and writing it; read it again."""

    code = "MEMORY_CHANGED"


class UnavailableError(PatternError, Unavailable):
    """NATS is unreachable or the service is still starting."""

    code = "NATS_ERROR"


class StorageError(PatternError):
    """NATS answered but refused the operation (retrying will not help by itself)."""

    code = "NATS_ERROR"
