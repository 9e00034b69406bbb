"""TLS for Loom's HTTP clients.

httpx loads the whole CA bundle for every client it makes: about 25 to 40 ms of CPU here,
as much as the rest of a Shuttle command, and Weft's spin-up mechanisms, notification sinks
and forge calls make a client per request. A client of an ``http://`` address never speaks
TLS, so it gets a context that trusts nothing instead: cheap, and were it ever asked for TLS
it would fail closed rather than connect unverified. An ``https://`` address gets httpx's
default verification, built once per process and shared (an ``SSLContext`` is safe to share
between clients and threads; ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` are read when it is built).
"""

from __future__ import annotations

import functools
import ssl
from urllib.parse import urlsplit


@functools.cache
def default_tls() -> ssl.SSLContext:
    """httpx's own default verification (its CA bundle, or the environment's), built once.
    httpx is imported here, not above: a Shuttle command that makes no request (``shuttle
    config path``) imports this module and must not pay for httpx."""
    import httpx

    return httpx.create_ssl_context()


def client_tls(url: str) -> ssl.SSLContext:
    """What to give an httpx client of ``url`` as ``verify``."""
    if urlsplit(url).scheme.lower() == "http":
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, with no CA: nothing passes
    return default_tls()
