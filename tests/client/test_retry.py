"""Asking again on "try again shortly" (loom.retry): the rule on its own, then Loom's clients
against a real HTTP server that answers 503 with ``Retry-After`` a set number of times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from loom import AsyncLoomClient, Refused
from loom.retry import MAX_ATTEMPTS, MAX_WAIT_S, retry_wait
from loom.transport import Connection, WeftClient
from testsupport.serving import serve_in_thread


def test_a_safe_read_answered_503_with_retry_after_is_asked_again() -> None:
    assert retry_wait("GET", 503, "1", 1) == 1.0
    assert retry_wait("head", 503, "0", 1) == 0.0
    assert retry_wait("GET", 503, "60", 1) == MAX_WAIT_S


def test_writes_other_statuses_and_a_503_without_retry_after_go_to_the_caller() -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert retry_wait(method, 503, "1", 1) is None, method
    for status in (200, 404, 409, 429, 500, 502):
        assert retry_wait("GET", status, "1", 1) is None, status
    assert retry_wait("GET", 503, None, 1) is None
    assert retry_wait("GET", 503, "soon", 1) is None
    assert retry_wait("GET", 503, "-1", 1) is None


def test_the_attempts_are_bounded() -> None:
    assert retry_wait("GET", 503, "1", MAX_ATTEMPTS - 1) == 1.0
    assert retry_wait("GET", 503, "1", MAX_ATTEMPTS) is None


def test_retry_after_as_an_http_date() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    wait = retry_wait("GET", 503, later, 1)
    assert wait is not None and 1.0 < wait <= 3.0
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert retry_wait("GET", 503, past, 1) == 0.0
    far = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    assert retry_wait("GET", 503, far, 1) == MAX_WAIT_S


class Busy:
    """A server that answers ``/busy/{times}/{key}`` 503 ``times`` times, then 200; with
    ``?after=`` it sends that as ``Retry-After`` (none without it)."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    async def answer(self, request: Request) -> JSONResponse:
        key = f"{request.method} {request.path_params['key']}"
        self.seen[key] += 1
        if self.seen[key] <= int(request.path_params["times"]):
            after = request.query_params.get("after")
            headers = {"Retry-After": after} if after is not None else None
            body = {"error": "nats_unavailable", "message": "NATS is unreachable. Try again shortly."}
            return JSONResponse(body, status_code=503, headers=headers)
        return JSONResponse({"answered": self.seen[key]})

    def app(self) -> Starlette:
        methods = ["GET", "POST"]
        return Starlette(routes=[Route("/busy/{times:int}/{key}", self.answer, methods=methods)])


@pytest.fixture(scope="module")
def busy() -> Iterator[tuple[Busy, str]]:
    server = Busy()
    with serve_in_thread(server.app(), name="busy") as served:
        yield server, served.url


def test_the_client_reads_through_a_passing_503(busy: tuple[Busy, str]) -> None:
    server, url = busy
    with WeftClient(Connection(url)) as client:
        assert client.get("/busy/2/read", after="0") == {"answered": 3}
    assert server.seen["GET read"] == 3


def test_the_client_gives_up_after_its_attempts(busy: tuple[Busy, str]) -> None:
    server, url = busy
    with WeftClient(Connection(url)) as client, pytest.raises(Refused) as refused:
        client.get("/busy/100/down", after="0")
    assert (refused.value.status, refused.value.code) == (503, "nats_unavailable")
    assert server.seen["GET down"] == MAX_ATTEMPTS


def test_the_client_never_repeats_a_write_or_a_503_without_retry_after(busy: tuple[Busy, str]) -> None:
    server, url = busy
    with WeftClient(Connection(url)) as client:
        with pytest.raises(Refused) as refused:
            client.post("/busy/1/write", after="0")
        assert refused.value.status == 503
        assert server.seen["POST write"] == 1
        with pytest.raises(Refused):
            client.get("/busy/1/bare")
        assert server.seen["GET bare"] == 1


async def test_the_asyncio_client_reads_through_a_passing_503(busy: tuple[Busy, str]) -> None:
    server, url = busy
    async with AsyncLoomClient(url) as client:
        answer = await client.request("GET", "/busy/1/async-read", params={"after": "0"})
    assert answer == {"answered": 2}
    assert server.seen["GET async-read"] == 2
