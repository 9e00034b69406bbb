"""The one way Loom's clients talk HTTP to Weft (Shuttle and :mod:`loom.client`): base URL,
bearer token, project header and timeouts, and every failure as :class:`Refused` (Weft said
no, its structured error kept) or :class:`Unreachable` (no answer).

httpx is imported on first use so commands that never call Weft start fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from loom.errors import Refused, Unreachable
from shared.tls import client_tls

if TYPE_CHECKING:
    import httpx

PROJECT_HEADER = "X-Loom-Project"
USER_AGENT = "shuttle"
"""What Shuttle calls itself; the public client says ``loom-client``."""


class Endpoint(Protocol):
    """Where Weft is and how to talk to it (Shuttle's settings are one)."""

    @property
    def api_url(self) -> str: ...
    @property
    def api_token(self) -> str | None: ...
    @property
    def project_id(self) -> str | None: ...
    @property
    def timeout(self) -> float: ...


@dataclass(frozen=True)
class Connection:
    """An :class:`Endpoint` given directly (the public client's)."""

    api_url: str
    api_token: str | None = None
    project_id: str | None = None
    timeout: float = 10.0


def import_httpx() -> Any:
    """httpx, without its optional command line: ``import httpx`` also loads
    ``httpx._main`` (click, rich, pygments: ~45 ms) whenever those are installed,
    and httpx falls back to a stub when that module cannot be imported."""
    import sys

    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    import httpx

    return httpx


def seg(value: str) -> str:
    """One path segment, percent-encoded so an id can never change the route."""
    return quote(value, safe="")


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any]:
    if not params:
        return {}
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None or value == [] or value == "":
            continue
        out[key] = str(value).lower() if isinstance(value, bool) else value
    return out


def describe_error_body(status: int, reason: str, body: Any) -> tuple[str, str, Any]:
    """(code, message, details) from Weft's ``{"error", "message", "details"}`` body,
    tolerating FastAPI's ``{"detail": ...}`` and bodies that are not JSON."""
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body.get("error") or reason), body["message"], body.get("details")
        detail = body.get("detail")
        if isinstance(detail, str):
            return reason, detail, None
        if isinstance(detail, list):
            parts = []
            for entry in detail:
                if isinstance(entry, dict):
                    loc = ".".join(str(p) for p in entry.get("loc", ()) if p not in ("body", "query"))
                    parts.append(f"{loc}: {entry.get('msg', '')}" if loc else str(entry.get("msg", "")))
            if parts:
                return "invalid", "; ".join(parts), detail
    return reason.lower().replace(" ", "_") or "error", f"{status} {reason}".strip(), None


class WeftClient:
    """Synchronous client for Weft's REST API (a CLI runs one request at a time)."""

    def __init__(self, settings: Endpoint, *, user_agent: str = USER_AGENT) -> None:
        self.settings = settings
        self.user_agent = user_agent
        self.base_url = settings.api_url
        self._http: httpx.Client | None = None

    # -- plumbing ------------------------------------------------------------
    def headers(self) -> dict[str, str]:
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.settings.api_token:
            headers["Authorization"] = f"Bearer {self.settings.api_token}"
        if self.settings.project_id:
            headers[PROJECT_HEADER] = self.settings.project_id
        return headers

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            httpx = import_httpx()
            from loom.retry import retrying

            self._http = httpx.Client(
                base_url=self.base_url,
                transport=retrying(client_tls(self.base_url)),
                headers=self.headers(),
                timeout=httpx.Timeout(self.settings.timeout, connect=min(self.settings.timeout, 5.0)),
                follow_redirects=False,
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> WeftClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        """One call; returns the decoded JSON (None for an empty body) or raises
        :class:`Refused` / :class:`Unreachable`."""
        httpx = import_httpx()

        try:
            response = self.http.request(method, path, **request_parts(params, body))
        except httpx.HTTPError as exc:
            raise unreachable(self.settings, exc) from None
        return decode(self.base_url, method, path, response)

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.request("POST", path, params=params, body=body)

    def put(self, path: str, body: Any, **params: Any) -> Any:
        return self.request("PUT", path, params=params, body=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body=body)

    def delete(self, path: str, **params: Any) -> Any:
        return self.request("DELETE", path, params=params)

    def pages(self, path: str, params: Mapping[str, Any], *, limit: int, follow: bool) -> Iterator[Any]:
        """Yield every page of a paged listing; with ``follow`` pass ``next_cursor``
        back until the listing is exhausted."""
        query = dict(params)
        query["limit"] = limit
        while True:
            page = self.get(path, **query)
            yield page
            cursor = page.get("next_cursor") if isinstance(page, dict) else None
            if not follow or not cursor:
                return
            query["cursor"] = cursor

    # -- WebSocket -----------------------------------------------------------
    def ws_url(self, path: str = "/api/ws", params: Mapping[str, Any] | None = None) -> str:
        parts = urlsplit(self.base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        query = urlencode(_clean(params))
        return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, query, ""))


def request_parts(params: Mapping[str, Any] | None, body: Any) -> dict[str, Any]:
    """The query and the JSON body of a request, as httpx takes them (sync and async)."""
    return {
        "params": _clean(params),
        "content": None if body is None else json.dumps(body).encode(),
        "headers": None if body is None else {"Content-Type": "application/json"},
    }


def unreachable(endpoint: Endpoint, exc: Exception) -> Unreachable:
    """What an httpx failure to get an answer is said as."""
    httpx = import_httpx()
    if isinstance(exc, httpx.TimeoutException):
        return Unreachable(f"Weft at {endpoint.api_url} did not answer within {endpoint.timeout:g}s")
    return Unreachable(f"cannot reach Weft at {endpoint.api_url} ({_reason(exc)})")


def decode(base_url: str, method: str, path: str, response: httpx.Response) -> Any:
    """An answer's JSON, or :class:`Refused` with Weft's structured error."""
    try:
        body: Any = response.json() if response.content else None
    except ValueError:
        body = None
        if response.is_success:
            raise Refused(
                f"{method} {path}: {base_url} answered with something that is not JSON (is this Weft?)",
                status=response.status_code,
                code="bad_response",
            ) from None
    if response.is_success:
        return body
    code, message, details = describe_error_body(response.status_code, response.reason_phrase, body)
    if body is None and response.status_code == 404:
        message = f"{method} {path}: not found at {base_url} (is this Weft?)"
    raise Refused(message, status=response.status_code, code=code, details=details)


def _reason(exc: Exception) -> str:
    """A short cause without the request line (which httpx puts in some messages)."""
    text = str(exc).strip() or type(exc).__name__
    text = text.splitlines()[0]
    if "[Errno" in text:
        text = text.split("]", 1)[-1].strip() or text
    from shared.redact import redact

    return redact(text)
