"""HMAC-SHA256 signatures over a request body, as webhooks carry them (``sha256=<hex>``):
GitHub's deliveries to Weft (``X-Hub-Signature-256``) and Weft's own signed notifications
(``X-Loom-Signature-256``, docs/operator.md)."""

from __future__ import annotations

import hashlib
import hmac


def signature_of(secret: str, body: bytes) -> str:
    """The signature of ``body`` with ``secret``: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed(secret: str, body: bytes, given: str | None) -> bool:
    """Whether ``given`` is the body's signature with ``secret`` (compared in constant time)."""
    return given is not None and hmac.compare_digest(signature_of(secret, body), given)
