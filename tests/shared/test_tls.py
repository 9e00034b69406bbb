"""shared/tls.py: a client of an http:// address gets a context that trusts nothing (no CA
bundle loaded, the cost of every httpx client otherwise); an https:// one keeps httpx's own."""

from __future__ import annotations

import http.server
import ssl
import threading

import httpx
import pytest

from shared.tls import client_tls


def test_plain_http_gets_a_context_that_verifies_against_nothing() -> None:
    context = client_tls("http://127.0.0.1:8080")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0  # were TLS ever asked of it, nothing passes
    assert client_tls("HTTP://weft.local") is not True


@pytest.mark.parametrize("url", ["https://weft.example", "HTTPS://weft.example:8443/api"])
def test_https_keeps_httpx_default_verification(url: str) -> None:
    assert client_tls(url) is True


def test_an_http_client_built_with_it_still_speaks_plain_http() -> None:
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with httpx.Client(base_url=url, verify=client_tls(url)) as client:
            assert client.get("/health").text == "ok"
    finally:
        server.shutdown()
        server.server_close()
