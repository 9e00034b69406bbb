"""Keep secrets in a target's ``config`` out of every response and event.

Values under secret-looking keys are replaced by ``***`` (keys ending in
``_env`` name environment variables and are shown); other strings go
through :func:`shared.redact.redact` (URL credentials, ``token=...``). A PATCH
that sends ``***`` back keeps the stored value, so read-modify-write clients
cannot overwrite a secret with its mask.
"""

from __future__ import annotations

import re
from typing import Any

from shared.redact import MASK, redact

_SECRET_KEY = re.compile(
    r"(?i)(token|secret|passw(or)?d|passphrase|credential|auth|api[_-]?key|private|signing|cookie|(^|[_-])key$)"
)


def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def names_a_variable(key: str) -> bool:
    """``token_env``, ``secret_env``, ``headers_env``: these hold the *names* of
    environment variables (validated as upper-case names), never secrets, and
    an operator needs to see which variable a target reads."""
    return key.endswith("_env")


def redact_config(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (
                v
                if names_a_variable(str(k))
                else MASK
                if is_secret_key(str(k)) and v not in (None, "", {}, [])
                else redact_config(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_config(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value


def merge_masked(new: Any, old: Any) -> Any:
    """``new`` with every ``***`` replaced by the value it masks in ``old``."""
    if new == MASK:
        return old
    if isinstance(new, dict):
        previous = old if isinstance(old, dict) else {}
        return {k: merge_masked(v, previous.get(k)) for k, v in new.items()}
    return new
