"""Scrub credentials out of anything that might be logged or returned.

Every log line (through :class:`RedactingFilter`) and every error message Loom
builds goes through :func:`redact`, so a password or token given in a URL or
in the environment cannot leak into logs, API responses or registry entries.
"""

from __future__ import annotations

import logging
import re
import threading

# userinfo runs to the last '@' before the host, so an unencoded '@' in a password is covered too
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s]+)@")
# key=value, key: value, "key": "value" and Python reprs ('key': 'value'); a quoted
# value is masked up to its closing quote, spaces and all.
_KEY_VALUE = re.compile(
    r"(?i)(?P<key>[\"']?(?:pass(?:word)?|token|secret|api[_-]?key|auth_token|nats_pass|nats_token)[\"']?"
    r"\s*[:=]\s*)"
    r"(?:(?P<q>[\"'])(?:\\.|(?!(?P=q))[^\\])*(?P=q)|[\"']?[^\s\"',}&]+)"
)
MASK = "***"

# Words our own messages put where a secret would go ("bearer token is required",
# "api_token: must be set", "?token= or ..."): a credential is never one of
# these, so they stay readable. Anything else after a secret-looking key or
# after "bearer" is masked, however short or word-like.
_PROSE = frozenset(
    "a an and are as be but by empty expected for given has invalid is missing must no none not "  # noqa: SIM905
    "null of omitted or required set the to unset was were with".split()
)
_BEARER_PROSE = frozenset(
    "token tokens auth authentication authorization credential credentials scheme header prefix".split()  # noqa: SIM905
)
_PLACEHOLDER = re.compile(r"<[A-Za-z_ -]{1,40}>")
_BEARER = re.compile(r"(?i)(?P<lead>bearer\s+)(?P<value>[A-Za-z0-9._~+/=-]+)")

_known_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a secret so that it is masked wherever it later appears verbatim."""
    if value and len(value) >= 3:
        with _lock:
            _known_secrets.add(value)


def redact(text: object) -> str:
    """Return ``text`` as a string with URL credentials, known secrets and
    password/token assignments masked."""
    s = str(text)
    # known secrets first: the patterns below may cut a secret in two and leave part of it
    with _lock:
        secrets = sorted(_known_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in s:
            s = s.replace(secret, MASK)
    s = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", s)
    s = _KEY_VALUE.sub(_mask_value, s)
    s = _BEARER.sub(_mask_bearer, s)
    return s


def _mask_value(match: re.Match[str]) -> str:
    quote = match.group("q") or ""
    if not quote:
        value = match.group(0)[len(match.group("key")) :].strip("\"'").rstrip(".,;:!?)")
        if value.lower() in _PROSE or _PLACEHOLDER.fullmatch(value):
            return match.group(0)
    return f"{match.group('key')}{quote}{MASK}{quote}"


def _mask_bearer(match: re.Match[str]) -> str:
    if match.group("value").rstrip(".").lower() in _BEARER_PROSE:
        return match.group(0)
    return f"{match.group('lead')}{MASK}"


class RedactingFilter(logging.Filter):
    """Logging filter that renders the message and redacts it in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must not drop the record
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def configure_logging(level: str | int = "INFO") -> None:
    """Log to stderr only (stdout belongs to MCP in Warp and Pattern), redacted."""
    import sys

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
    root.setLevel(level)
    install_redaction()


def install_redaction() -> None:
    """Attach the redacting filter to every existing handler (idempotent).

    Also used by tests so that captured records pass through the same filter.
    """
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
