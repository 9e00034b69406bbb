"""Sending one notice to one sink (docs/operator.md, Notifications).

Every service Apprise speaks (Slack, ntfy, e-mail over SMTP, Discord, Telegram, Teams,
generic JSON webhooks, ...) goes through Apprise, one URL per sink. The one sink Apprise
cannot be is a webhook whose body is signed: Loom's own ``webhook`` kind posts the
notice as JSON with ``X-Loom-Signature-256: sha256=<HMAC of the body>`` (the same scheme
GitHub uses, :mod:`shared.signing`).

What goes wrong is kept in words that hold no URL: Apprise's own log of a send (which
may name hosts, tokens in paths, ...) is read for an HTTP status only and never passed on.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from datetime import datetime
from types import ModuleType
from typing import Final

import httpx

from shared.signing import signature_of
from weft.notify.rules import Notice, Sink

SIGNATURE_HEADER: Final = "X-Loom-Signature-256"
SEND_TIMEOUT_S: Final = 10.0
_STATUS = re.compile(r"error=(\d{3})\b")


@functools.cache
def _library() -> ModuleType:
    """Apprise, imported at its first use (its plugins take a twentieth of Weft's start,
    and most Wefts notify nobody)."""
    import apprise

    # Apprise logs each send, naming hosts and, for some services, tokens in their paths: its
    # records stay out of Weft's log (a send's outcome is recorded by the dispatcher instead).
    logging.getLogger(apprise.LOGGER_NAME).propagate = False
    return apprise


def understood(url: str) -> bool:
    """Whether Apprise knows how to send to ``url`` (its scheme and shape)."""
    return bool(_library().Apprise().add(url))


async def deliver(sink: Sink, notice: Notice, http: httpx.AsyncClient, at: datetime) -> str | None:
    """Send ``notice`` to ``sink``: None when it was delivered, else why not (no URL in it)."""
    if sink.kind == "webhook":
        return await _webhook(sink, notice, http, at)
    return await _apprise(sink, notice)


async def _webhook(sink: Sink, notice: Notice, http: httpx.AsyncClient, at: datetime) -> str | None:
    assert sink.secret is not None  # a webhook sink always has one (SinkSettings)
    body = json.dumps(notice.payload(at)).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature_of(sink.secret.get_secret_value(), body),
        "User-Agent": "loom-weft",
    }
    try:
        answer = await http.post(sink.url.get_secret_value(), content=body, headers=headers)
    except httpx.TimeoutException:
        return "the receiver did not answer in time"
    except httpx.HTTPError:
        return "the receiver could not be reached"
    if not 200 <= answer.status_code < 300:
        return f"the receiver answered HTTP {answer.status_code}"
    return None


async def _apprise(sink: Sink, notice: Notice) -> str | None:
    apprise = _library()
    sender = apprise.Apprise()
    if not sender.add(sink.url.get_secret_value()):
        return "Apprise does not understand this sink's URL"
    body = notice.body + (f"\n{notice.link}" if notice.link else "")
    try:
        result = await sender.async_notify(
            title=notice.title,
            body=body,
            notify_type={"P0": apprise.NotifyType.FAILURE, "P1": apprise.NotifyType.WARNING}.get(
                notice.priority.value, apprise.NotifyType.INFO
            ),
            timeout=SEND_TIMEOUT_S,
            log_level=logging.WARNING,
        )
    except Exception as exc:  # a plugin's own bug must not stop the dispatcher
        return f"Apprise failed ({type(exc).__name__})"
    if result:
        return None
    said = " ".join(entry.message for entry in result.call_logs())
    for service in result.results:
        for attempt in service:
            said += " " + " ".join(entry.message for entry in attempt)
    status = _STATUS.search(said)
    if status is not None:
        return f"the service answered HTTP {status.group(1)}"
    if "connection" in said.lower() or "timeout" in said.lower() or "timed out" in said.lower():
        return "the service could not be reached"
    return "the service did not take the notice"
