"""One example of every exception class :mod:`shared.nats.failures` knows, with the code
every part must answer it with (Warp's and Weft's; Pattern's is ``NATS_ERROR``).

The parts' tests raise each of these inside a real tool call or request and check that
they agree; ``tests/shared/nats/test_failures.py`` checks that the list covers every class
the classifier names."""

from __future__ import annotations

from collections.abc import Callable

import nats.errors
import nats.js.errors

from shared.nats.failures import JETSTREAM_ERROR, NATS_UNAVAILABLE
from shared.nats.jsapi import JetStreamReplyError

SECRET = "s3cr3tPASSw0rd"
"""Put into JetStream's description of a refusal: no message may show it."""

FAILURES: dict[str, tuple[Callable[[], BaseException], str]] = {
    "nats-timeout": (nats.errors.TimeoutError, NATS_UNAVAILABLE),
    "flush-timeout": (nats.errors.FlushTimeoutError, NATS_UNAVAILABLE),
    "fetch-timeout": (nats.js.errors.FetchTimeoutError, NATS_UNAVAILABLE),
    "asyncio-timeout": (TimeoutError, NATS_UNAVAILABLE),
    "connection-closed": (nats.errors.ConnectionClosedError, NATS_UNAVAILABLE),
    "stale-connection": (nats.errors.StaleConnectionError, NATS_UNAVAILABLE),
    "unexpected-eof": (nats.errors.UnexpectedEOF, NATS_UNAVAILABLE),
    "draining": (nats.errors.ConnectionDrainingError, NATS_UNAVAILABLE),
    "reconnecting": (nats.errors.ConnectionReconnectingError, NATS_UNAVAILABLE),
    "outbound-buffer": (nats.errors.OutboundBufferLimitError, NATS_UNAVAILABLE),
    "no-responders": (nats.errors.NoRespondersError, NATS_UNAVAILABLE),
    "jetstream-503": (
        lambda: nats.js.errors.ServiceUnavailableError(code=503, description="JetStream not enabled"),
        NATS_UNAVAILABLE,
    ),
    "no-stream-response": (nats.js.errors.NoStreamResponseError, NATS_UNAVAILABLE),
    "jetstream-api-error": (
        lambda: nats.js.errors.APIError(
            code=400, err_code=10058, description=f"password={SECRET} stream name already in use"
        ),
        JETSTREAM_ERROR,
    ),
    "jetstream-not-found": (
        lambda: nats.js.errors.NotFoundError(code=404, err_code=10059, description="stream not found"),
        JETSTREAM_ERROR,
    ),
    "jetstream-reply": (lambda: JetStreamReplyError("404", "No Messages"), JETSTREAM_ERROR),
}
"""name: (a factory of the exception, the code Warp and Weft answer with)."""
