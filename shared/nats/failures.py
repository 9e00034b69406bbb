"""NATS failures as the one refusal every part answers with.

nats-py raises its own exceptions when NATS is slow, gone or refusing; Warp,
Weft and Pattern each meet them at their edge. :func:`nats_failure` is the one
place that decides what such an exception means, so a stale connection is
"unavailable" in every part, with the same code:

* NATS did not answer, or cannot be reached now (a timeout, a closed, stale,
  draining or reconnecting connection, a full outbound buffer, no responders,
  JetStream not answering): :class:`NatsUnavailable`, ``nats_unavailable``;
* JetStream answered and refused (nats-py's ``APIError``, our own
  :class:`~shared.nats.jsapi.JetStreamReplyError`): :class:`JetStreamRefused`,
  ``jetstream_error``;
* anything else: None, a bug for the part to report as one.

Each part renders the result its own way (Weft's status, Warp's tool error,
Pattern's TypeScript code) and never classifies again. Messages carry no
secret: a URL only in its credential-free display form, JetStream's own words
through :func:`shared.redact.redact`.
"""

from __future__ import annotations

from typing import Final

import nats.errors
import nats.js.errors

from shared.errors import LoomError, Unavailable
from shared.nats.client import display_url
from shared.redact import redact

NATS_UNAVAILABLE: Final = "nats_unavailable"
JETSTREAM_ERROR: Final = "jetstream_error"


class NatsUnavailable(Unavailable):
    """NATS did not answer or cannot be reached now; retrying may help."""

    code = NATS_UNAVAILABLE


class JetStreamRefused(LoomError):
    """JetStream answered and refused the operation; retrying alone will not help.

    ``description`` is what JetStream said (already safe to show)."""

    code = JETSTREAM_ERROR
    description: str = ""


TIMEOUTS: Final[tuple[type[BaseException], ...]] = (nats.errors.TimeoutError, TimeoutError)
"""NATS (or a deadline around a NATS call) did not answer in time; nats-py's own
time-outs (flush, drain, fetch) are among them."""

UNREACHABLE: Final[tuple[type[BaseException], ...]] = (
    nats.errors.ConnectionClosedError,
    nats.errors.StaleConnectionError,
    nats.errors.ConnectionDrainingError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.NoRespondersError,
)
"""The connection cannot carry the request now."""

JETSTREAM_DOWN: Final[tuple[type[BaseException], ...]] = (
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
)
"""JetStream did not answer (not enabled, or not up yet): an ``APIError`` that means unavailable."""

REFUSALS: Final[tuple[type[BaseException], ...]] = (nats.js.errors.APIError, JetStreamRefused)
"""JetStream answered with an error."""


def nats_failure(
    exc: BaseException,
    *,
    nats_url: str | None = None,
    doing: str | None = None,
    retry: str | None = None,
) -> NatsUnavailable | JetStreamRefused | None:
    """What ``exc`` means as a NATS failure, or None when it is not one (a bug).

    ``nats_url`` names the server in the message (shown credential-free);
    ``doing`` says what was under way (``"storing the memory"``: "... while
    storing the memory"); ``retry`` is the part's advice, added to an
    "unavailable" message (``"Warp keeps reconnecting; retry in a few seconds."``).
    """
    if isinstance(exc, NatsUnavailable):
        return exc
    server = "NATS" if nats_url is None else f"NATS at {display_url(nats_url)}"
    during = f" while {doing}" if doing else ""
    if isinstance(exc, TIMEOUTS):
        found = f"{server} did not answer in time{during}; the operation may not have happened"
    elif isinstance(exc, UNREACHABLE):
        found = f"{server} is unreachable{during} ({type(exc).__name__})"
    elif isinstance(exc, JETSTREAM_DOWN):
        jetstream = "JetStream" if nats_url is None else f"JetStream at {display_url(nats_url)}"
        said = getattr(exc, "description", None) or (
            "no stream answered: JetStream is not enabled, or the stream has no leader yet"
            if isinstance(exc, nats.js.errors.NoStreamResponseError)
            else f"{type(exc).__name__}: is JetStream enabled?"
        )
        found = f"{jetstream} is unavailable{during} ({said})"
    elif isinstance(exc, REFUSALS):
        said = redact(getattr(exc, "description", None) or type(exc).__name__)
        refused = JetStreamRefused(redact(f"NATS refused the operation{during}: {said}"))
        refused.description = said
        return refused
    else:
        return None
    return NatsUnavailable(redact(f"{found}. {retry}" if retry else found))
