"""redact() and the logging filter: credentials never reach a log line."""

from __future__ import annotations

import io
import logging
import sys
import uuid
from collections.abc import Iterator

import pytest

from shared.redact import MASK, RedactingFilter, configure_logging, install_redaction, redact, register_secret


def _secret() -> str:
    """A unique secret per test: registered secrets are process-global."""
    return f"s3cr3t-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nats://bob:hunter2@host:4222", "nats://***@host:4222"),
        ("tls://bob:p%40ss%2Fw@nats.example:4222/", "tls://***@nats.example:4222/"),
        ("ws://just-a-token@127.0.0.1:8080", "ws://***@127.0.0.1:8080"),
        ("wss://u:p@a:1,wss://v:q@b:2", "wss://***@a:1,wss://***@b:2"),
        ("failed: nats://bob:p@ss@host:4222 down", "failed: nats://***@host:4222 down"),
        ("https://user:pw@api.example/x?y=1", "https://***@api.example/x?y=1"),
    ],
)
def test_url_credentials(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "url",
    ["nats://127.0.0.1:4222", "mail bob@example.com about nats://host:4222", "ws://h:1/path@x"],
)
def test_urls_without_credentials_untouched(url: str) -> None:
    assert redact(url) == url


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 next", "password=*** next"),
        ("NATS_PASS=abc NATS_TOKEN=def", "NATS_PASS=*** NATS_TOKEN=***"),
        ("token: abc123, user: bob", "token: ***, user: bob"),
        ("api_key=zzz&x=1", "api_key=***&x=1"),
        ("api-key: zzz", "api-key: ***"),
        ("client_secret=abc", "client_secret=***"),
        ("https://h/x?token=abc&y=2", "https://h/x?token=***&y=2"),
        ("PASSWORD = 'x y z'", "PASSWORD = '***'"),
        ('pass="unterminated', "pass=***"),
    ],
)
def test_key_value(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"user": "bob", "password": "hunter2"}', '{"user": "bob", "password": "***"}'),
        ('{"password":"correct horse battery"}', '{"password":"***"}'),
        ('{"token": "a\\"b c", "n": 1}', '{"token": "***", "n": 1}'),
        ("{'user': 'bob', 'password': 'two words'}", "{'user': 'bob', 'password': '***'}"),
    ],
)
def test_json_and_repr_values(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    ["max_tokens=100", "tokens: 5", "user=bob", "passed: 12 tests", '{"status": "ok"}'],
)
def test_ordinary_text_untouched(text: str) -> None:
    assert redact(text) == text


def test_bearer_tokens() -> None:
    assert redact("Authorization: Bearer abc.DEF-123_x/y+z=") == "Authorization: Bearer ***"
    assert redact("got bearer xyz from header") == "got bearer *** from header"
    assert redact("bearer tokenABC9") == "bearer ***"  # only the bare word is prose
    assert redact("bearer token.x9") == "bearer ***"


@pytest.mark.parametrize(
    "text",
    [
        # Weft's and Shuttle's own auth failures (issue 21: "a valid bearer *** is required")
        "a valid bearer token is required (Authorization: Bearer <token>)",
        "a valid token is required (Sec-WebSocket-Protocol: bearer, <token>; or ?token=<token>; "
        "or Authorization: Bearer <token>)",
        "a bearer token is required and none was given (Authorization: Bearer <token>)",
        "the bearer token given is not one this Weft accepts (Authorization: Bearer <token>; one of "
        "WEFT_API_TOKENS)",
        "the token given is not one this Weft accepts (Sec-WebSocket-Protocol: bearer, <token>; or "
        "?token=<token>; or Authorization: Bearer <token>; one of WEFT_API_TOKENS)",
        "Bearer tokens are compared in constant time",
        "api_token: must be 1-4096 printable characters without spaces",
        "password: is required",
        "token: not set",
        "a valid token is required (?token= or Sec-WebSocket-Protocol)",
    ],
)
def test_our_own_words_are_not_masked(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("token: must9", "token: ***"),
        ("password=is-it", "password=***"),
        ("?token=<script>x", "?token=***"),
        ("Bearer <token>x", "Bearer <token>x"),  # no credential characters after "Bearer "
    ],
)
def test_near_misses_of_prose_are_still_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_registered_secrets_masked_anywhere() -> None:
    secret = _secret()
    assert redact(f"connecting with {secret}!") == f"connecting with {secret}!"
    register_secret(secret)
    assert redact(f"connecting with {secret}!") == f"connecting with {MASK}!"
    assert redact(f"a{secret}b{secret}") == f"a{MASK}b{MASK}"
    assert secret not in redact({"nested": [secret]})


def test_registered_secret_with_url_specials_in_a_url() -> None:
    secret = f"p@ss/{uuid.uuid4().hex[:6]}"
    register_secret(secret)
    assert secret not in redact(f"nats://bob:{secret}@host:4222")
    assert "ss/" not in redact(f"nats://bob:{secret}@host:4222")


def test_short_or_empty_secrets_not_registered() -> None:
    register_secret(None)
    register_secret("")
    register_secret("ab")
    assert redact("ab cd") == "ab cd"


def test_redact_accepts_any_object() -> None:
    class Boom(Exception):
        pass

    assert redact(Boom("password=x")) == "password=***"
    assert redact(42) == "42"


# -- the logging filter ----------------------------------------------------------


@pytest.fixture
def filtered_logger() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger(f"loom.test.redact.{uuid.uuid4().hex}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def test_filter_redacts_message_and_args(filtered_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = filtered_logger
    logger.debug("connecting to %s with %s", "nats://bob:pw-one@h:1", {"password": "pw-two"})
    out = stream.getvalue()
    assert "pw-one" not in out and "pw-two" not in out
    assert "nats://***@h:1" in out and "'password': '***'" in out


def test_filter_redacts_exceptions(filtered_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = filtered_logger
    secret = _secret()
    register_secret(secret)
    try:
        raise ConnectionError(f"auth failed for nats://bob:{secret}@h:1 token=tok-999")
    except ConnectionError:
        logger.exception("could not connect")
    out = stream.getvalue()
    assert "Traceback" in out and "ConnectionError" in out and "could not connect" in out
    assert secret not in out and "tok-999" not in out


def test_filter_redacts_chained_exceptions(filtered_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = filtered_logger
    try:
        try:
            raise ValueError("password=inner-secret")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError:
        logger.error("failed", exc_info=True)
    out = stream.getvalue()
    assert "inner-secret" not in out and "ValueError" in out and "RuntimeError" in out


def test_filter_redacts_stack_info(filtered_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = filtered_logger

    def emit(token: str) -> None:
        logger.warning("here", stack_info=True)

    emit(token="stack-tok-77")  # this source line is part of the rendered stack
    out = stream.getvalue()
    assert "Stack (most recent call last)" in out
    assert 'emit(token="***")' in out and "stack-tok-77" not in out


def test_broken_format_string_keeps_the_record(filtered_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = filtered_logger
    logger.error("value %d and token=%s", "not-a-number")
    out = stream.getvalue()
    assert "value %d and token=***" in out


def test_install_redaction_is_idempotent() -> None:
    root = logging.getLogger()
    handler = logging.StreamHandler(io.StringIO())
    root.addHandler(handler)
    try:
        install_redaction()
        install_redaction()
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
    finally:
        root.removeHandler(handler)


def test_configure_logging_writes_redacted_to_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    try:
        configure_logging("DEBUG")
        logging.getLogger("loom.test").info("url nats://bob:very-secret@h:1")
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "nats://***@h:1" in captured.err and "very-secret" not in captured.err
        assert root.level == logging.DEBUG
        assert all(getattr(h, "stream", None) is not sys.stdout for h in root.handlers)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
