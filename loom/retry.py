"""Asking Weft again when it says "try again shortly".

Weft answers ``503`` with a ``Retry-After`` header when a NATS call it made for the request
timed out or its connection is down (``nats_unavailable``, docs/weft.md): the fabric is busy or
reconnecting, and the same read usually succeeds a moment later. A read is safe to repeat; a
write is not (a ``POST`` whose NATS reply timed out may still have happened), so only safe
methods are asked again, a bounded number of times, and every other answer goes to the caller
unchanged. Both of Loom's clients and the scenario harness send their requests through
:class:`RetryingTransport` or :class:`AsyncRetryingTransport`.

This module imports httpx; :mod:`loom.transport` imports it only when a client is built.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods RFC 9110 calls safe: asking twice changes nothing."""
MAX_ATTEMPTS = 4
"""Requests sent for one call, the first included."""
MAX_WAIT_S = 5.0
"""The longest pause between two of them, whatever ``Retry-After`` asks for."""


def retry_wait(method: str, status: int, retry_after: str | None, attempt: int) -> float | None:
    """Seconds to wait before sending ``attempt + 1``, or None to give this answer to the caller.

    Only a safe method answered ``503`` with a ``Retry-After`` (seconds or an HTTP date) is
    asked again: a 503 without one is an outage the server does not expect to end soon."""
    if method.upper() not in SAFE_METHODS or status != 503 or retry_after is None:
        return None
    if attempt >= MAX_ATTEMPTS:
        return None
    value = retry_after.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_WAIT_S)


def _wait(request: httpx.Request, response: httpx.Response, attempt: int) -> float | None:
    return retry_wait(request.method, response.status_code, response.headers.get("Retry-After"), attempt)


class RetryingTransport(httpx.BaseTransport):
    """Sends each request through ``inner``, again while :func:`retry_wait` says so."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            response = self.inner.handle_request(request)
            wait = _wait(request, response, attempt)
            if wait is None:
                return response
            response.close()
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        self.inner.close()


class AsyncRetryingTransport(httpx.AsyncBaseTransport):
    """:class:`RetryingTransport` for ``httpx.AsyncClient``."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        attempt = 1
        while True:
            response = await self.inner.handle_async_request(request)
            wait = _wait(request, response, attempt)
            if wait is None:
                return response
            await response.aclose()
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        await self.inner.aclose()


def retrying(verify: ssl.SSLContext | bool) -> RetryingTransport:
    """The transport for a synchronous client of Weft (``verify``: :func:`shared.tls.client_tls`)."""
    return RetryingTransport(httpx.HTTPTransport(verify=verify))


def async_retrying(verify: ssl.SSLContext | bool) -> AsyncRetryingTransport:
    """The transport for an asyncio client of Weft (``verify``: :func:`shared.tls.client_tls`)."""
    return AsyncRetryingTransport(httpx.AsyncHTTPTransport(verify=verify))
