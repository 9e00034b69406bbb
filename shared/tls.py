"""TLS for Loom's HTTP clients.

httpx loads the whole CA bundle for every client it makes: about 40 ms of CPU here, as much
as the rest of a Shuttle command. A client of an ``http://`` address never speaks TLS, so it
gets a context that trusts nothing instead: cheap, and were it ever asked for TLS it would
fail closed rather than connect unverified. An ``https://`` address keeps httpx's default.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit


def client_tls(url: str) -> ssl.SSLContext | bool:
    """What to give an httpx client of ``url`` as ``verify``."""
    if urlsplit(url).scheme.lower() == "http":
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, with no CA: nothing passes
    return True
