"""shared/tls.py: a client of an http:// address gets a context that trusts nothing (no CA
bundle loaded, the cost of every httpx client otherwise); an https:// one gets httpx's own
verification, built once per process (each client built it again: about 25 ms of CPU)."""

from __future__ import annotations

import http.server
import ssl
import threading

import httpx
import pytest

from shared.tls import client_tls, default_tls


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_plain_http_gets_a_context_that_verifies_against_nothing() -> None:
    context = client_tls("http://127.0.0.1:8080")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0  # were TLS ever asked of it, nothing passes
    assert client_tls("HTTP://weft.local") is not True


@pytest.mark.parametrize("url", ["https://weft.example", "HTTPS://weft.example:8443/api"])
def test_https_gets_httpx_default_verification_built_once(url: str) -> None:
    context = client_tls(url)
    assert context is default_tls() is client_tls("https://another.example")  # one per process
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    # httpx's own bundle, as an httpx client of its own would load it
    ca_count = httpx.create_ssl_context().cert_store_stats()["x509_ca"]
    assert context.cert_store_stats()["x509_ca"] == ca_count > 0


def test_the_shared_context_refuses_a_server_its_bundle_does_not_vouch_for() -> None:
    """Sharing the context shares its trust, not a weaker one: an HTTPS server whose
    certificate comes from a CA of the test's own is refused, every time it is asked."""
    import trustme

    ca = trustme.CA()
    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/health"
    try:
        for _ in range(2):
            with (
                httpx.Client(verify=client_tls(url)) as client,
                pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
            ):
                client.get(url)
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_client_built_with_it_still_speaks_plain_http() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with httpx.Client(base_url=url, verify=client_tls(url)) as client:
            assert client.get("/health").text == "ok"
    finally:
        server.shutdown()
        server.server_close()
