"""``LoomClient`` and ``AsyncLoomClient``: Weft's REST and WebSocket API for programs
(docs/client.md), with Loom's own models: work items, questions and leases are the
records the fabric stores (:mod:`shared.models`), validated as they arrive.

Both clients speak through the one transport Shuttle uses (:mod:`loom.transport`): the
same headers, timeouts and errors (:class:`loom.errors.Refused` with Weft's structured
error, :class:`loom.errors.Unreachable`). Listings that page are followed to the end unless
``limit`` says otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from loom import refs
from loom.errors import Unreachable, WatchTimedOut
from loom.events import Deadline, item_changes
from loom.transport import Connection, WeftClient, seg
from shared.models import FINAL_WORK_STATES, Lease, Question, Target, WorkItem
from shared.tls import client_tls
from shared.views import AgentView, Stats, UsageOut

USER_AGENT = "loom-client"
PAGE = 200
WATCH_RECHECK_S = 5.0
"""A quiet stream for this long: the item is read again (an event may have been missed)."""


def _submission(description: str, capability: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /api/work``'s body; a ``task_id`` (the submitter's own reference) is made up
    when none is given, as Shuttle does."""
    body = {"description": description, "capability": capability, **fields}
    body["task_id"] = body.get("task_id") or f"client-{uuid.uuid4().hex[:12]}"
    return {k: v for k, v in body.items() if v is not None}


def _plan_body(plan: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return dict(plan) if isinstance(plan, Mapping) else {"items": list(plan)}


class Fleet(BaseModel):
    """The fleet in one view: every agent (effective status), every target, the counts."""

    agents: list[AgentView]
    targets: list[Target]
    stats: Stats

    @classmethod
    def of(cls, agents: list[Any], targets: list[Any], stats: Any) -> Fleet:
        return cls.model_validate({"agents": agents, "targets": targets, "stats": stats})


class WorkEvent(dict[str, Any]):
    """One change of an item as Weft announced it: ``type`` (e.g. ``work.completed``) and
    ``item``, the item as it was then."""

    @property
    def type(self) -> str:
        return str(self["type"])

    @property
    def item(self) -> WorkItem:
        return WorkItem.model_validate(self["item"])


class LoomClient:
    """Synchronous client. ``url``: Weft's base URL; ``token``: a bearer token when Weft
    asks for one; ``project``: the project (Weft's default when None)."""

    def __init__(
        self, url: str, *, token: str | None = None, project: str | None = None, timeout: float = 10.0
    ) -> None:
        self.connection = Connection(url.rstrip("/"), token, project, timeout)
        self.api = WeftClient(self.connection, user_agent=USER_AGENT)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> LoomClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _all(self, path: str, params: Mapping[str, Any], limit: int | None) -> list[Any]:
        found: list[Any] = []
        for page in self.api.pages(path, params, limit=min(limit or PAGE, PAGE), follow=True):
            found.extend(page.get("items", []))
            if limit is not None and len(found) >= limit:
                return found[:limit]
        return found

    # -- work -------------------------------------------------------------------
    def submit(self, description: str, *, capability: str, **fields: Any) -> WorkItem:
        """Submit one item (``task_id``, ``priority``, ``depends_on``, ``review``, ... as
        ``POST /api/work`` takes them)."""
        return WorkItem.model_validate(
            self.api.post("/api/work", _submission(description, capability, fields))
        )

    def submit_plan(self, plan: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[WorkItem]:
        """A plan in one request: all of it or nothing (``{"items": [...]}`` with ``name``
        and ``after``, or the list of items)."""
        answer = self.api.post("/api/work/plan", _plan_body(plan))
        return [WorkItem.model_validate(i) for i in answer["items"]]

    def work(self, work_id: str) -> WorkItem:
        """The item ``work_id`` names: its id, its task id or the start of its id (as every
        method taking a ``work_id`` reads it; more than one match is refused)."""
        return WorkItem.model_validate(self.api.get(f"/api/work/{seg(self._work(work_id))}"))

    def _work(self, ref: str) -> str:
        return refs.work_id(self.api, ref)

    def work_list(
        self, *, status: str | None = None, limit: int | None = None, **filters: Any
    ) -> list[WorkItem]:
        items = self._all("/api/work", {"status": status, **filters}, limit)
        return [WorkItem.model_validate(i) for i in items]

    def cancel(self, work_id: str, reason: str = "") -> WorkItem:
        path = f"/api/work/{seg(self._work(work_id))}/cancel"
        return WorkItem.model_validate(self.api.post(path, {"reason": reason}))

    def watch(self, work_id: str, *, timeout: float | None = None) -> Iterator[WorkEvent]:
        """The item's changes as they happen, from a snapshot (``type`` ``snapshot``) until
        it is final; raises :class:`Unreachable` when ``timeout`` seconds pass first."""
        full_id = self._work(work_id)
        try:
            for kind, item, _ in item_changes(
                self.api, full_id, final=FINAL_WORK_STATES, recheck_s=WATCH_RECHECK_S, timeout=timeout
            ):
                yield WorkEvent(type=kind, item=item)
        except WatchTimedOut as exc:
            raise Unreachable(exc.message) from None

    def wait(self, work_id: str, *, timeout: float | None = None) -> WorkItem:
        """The item once it is final (completed, failed, cancelled, ...)."""
        final = None
        for event in self.watch(work_id, timeout=timeout):
            final = event
        assert final is not None  # watch yields the snapshot at least
        return final.item

    # -- questions ------------------------------------------------------------------
    def questions(self, *, status: str | None = "open", limit: int | None = None) -> list[Question]:
        return [Question.model_validate(q) for q in self._all("/api/questions", {"status": status}, limit)]

    def answer(self, question_id: str, answer: str, *, by: str = "operator") -> Question:
        body = {"answer": answer, "by": by}
        return Question.model_validate(self.api.post(f"/api/questions/{seg(question_id)}/answer", body))

    # -- the fleet, leases, usage ---------------------------------------------------
    def fleet(self) -> Fleet:
        """Agents, targets and the project's counts (``GET /api/agents``, ``/api/targets``,
        ``/api/stats``)."""
        return Fleet.of(
            self._all("/api/agents", {}, None),
            self._all("/api/targets", {}, None),
            self.api.get("/api/stats"),
        )

    def leases(self, *, path: Sequence[str] = (), holder: str | None = None) -> list[Lease]:
        """Live leases, under ``path`` or held by ``holder`` (an agent's id, handle or id prefix)."""
        if holder is not None:
            holder = refs.agent_id(self.api, holder, "holder")
        body = self.api.request("GET", "/api/leases", params={"path": list(path) or None, "holder": holder})
        return [Lease.model_validate(lease) for lease in body["items"]]

    def usage(self, *, by: str | None = None) -> UsageOut:
        """The tokens and cost the project's work reported (``GET /api/usage``)."""
        return UsageOut.model_validate(self.api.get("/api/usage", by=by))


class AsyncLoomClient:
    """The same API for asyncio programs (``async with AsyncLoomClient(...) as loom``)."""

    def __init__(
        self, url: str, *, token: str | None = None, project: str | None = None, timeout: float = 10.0
    ) -> None:
        from loom.transport import import_httpx

        httpx = import_httpx()
        from loom.retry import async_retrying

        self.connection = Connection(url.rstrip("/"), token, project, timeout)
        self._headers = WeftClient(self.connection, user_agent=USER_AGENT).headers()
        self._http = httpx.AsyncClient(
            base_url=self.connection.api_url,
            transport=async_retrying(client_tls(self.connection.api_url)),
            headers=self._headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            follow_redirects=False,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncLoomClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> Any:
        """One call, as :meth:`loom.transport.WeftClient.request` makes it."""
        from loom.transport import decode, import_httpx, request_parts, unreachable

        httpx = import_httpx()
        try:
            response = await self._http.request(method, path, **request_parts(params, body))
        except httpx.HTTPError as exc:
            raise unreachable(self.connection, exc) from None
        return decode(self.connection.api_url, method, path, response)

    async def _all(self, path: str, params: Mapping[str, Any], limit: int | None) -> list[Any]:
        found: list[Any] = []
        query = {**params, "limit": min(limit or PAGE, PAGE)}
        while True:
            page = await self.request("GET", path, params=query)
            found.extend(page.get("items", []))
            if (limit is not None and len(found) >= limit) or not page.get("next_cursor"):
                return found[:limit] if limit is not None else found
            query["cursor"] = page["next_cursor"]

    async def submit(self, description: str, *, capability: str, **fields: Any) -> WorkItem:
        body = _submission(description, capability, fields)
        return WorkItem.model_validate(await self.request("POST", "/api/work", body=body))

    async def submit_plan(self, plan: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[WorkItem]:
        answer = await self.request("POST", "/api/work/plan", body=_plan_body(plan))
        return [WorkItem.model_validate(i) for i in answer["items"]]

    async def work(self, work_id: str) -> WorkItem:
        path = f"/api/work/{seg(await self._work(work_id))}"
        return WorkItem.model_validate(await self.request("GET", path))

    async def _work(self, ref: str) -> str:
        return await refs.resolve_async(self.request, "work", ref, "work_id")

    async def work_list(
        self, *, status: str | None = None, limit: int | None = None, **filters: Any
    ) -> list[WorkItem]:
        return [
            WorkItem.model_validate(i)
            for i in await self._all("/api/work", {"status": status, **filters}, limit)
        ]

    async def cancel(self, work_id: str, reason: str = "") -> WorkItem:
        path = f"/api/work/{seg(await self._work(work_id))}/cancel"
        answer = await self.request("POST", path, body={"reason": reason})
        return WorkItem.model_validate(answer)

    async def watch(
        self, work_id: str, *, poll_s: float = 0.5, timeout: float | None = None
    ) -> AsyncIterator[WorkEvent]:
        """The item's changes until it is final, read from its record every ``poll_s``
        seconds (one event per change seen; the synchronous client follows the WebSocket)."""
        import asyncio

        deadline = Deadline(timeout)
        work_id = await self._work(work_id)
        item: dict[str, Any] = await self.request("GET", f"/api/work/{seg(work_id)}")
        yield WorkEvent(type="snapshot", item=item)
        while item.get("status") not in FINAL_WORK_STATES:
            if deadline.passed():
                raise Unreachable(f"work {work_id} is still {item.get('status')} after {timeout:g}s")
            await asyncio.sleep(poll_s)
            fresh: dict[str, Any] = await self.request("GET", f"/api/work/{seg(work_id)}")
            if fresh.get("updated_at") != item.get("updated_at"):
                item = fresh
                yield WorkEvent(type=f"work.{item.get('status')}", item=item)

    async def wait(self, work_id: str, *, timeout: float | None = None) -> WorkItem:
        final = None
        async for event in self.watch(work_id, timeout=timeout):
            final = event
        assert final is not None  # watch yields the snapshot at least
        return final.item

    async def questions(self, *, status: str | None = "open", limit: int | None = None) -> list[Question]:
        return [
            Question.model_validate(q) for q in await self._all("/api/questions", {"status": status}, limit)
        ]

    async def answer(self, question_id: str, answer: str, *, by: str = "operator") -> Question:
        path = f"/api/questions/{seg(question_id)}/answer"
        return Question.model_validate(await self.request("POST", path, body={"answer": answer, "by": by}))

    async def fleet(self) -> Fleet:
        agents = await self._all("/api/agents", {}, None)
        return Fleet.of(
            agents, await self._all("/api/targets", {}, None), await self.request("GET", "/api/stats")
        )

    async def leases(self, *, path: Sequence[str] = (), holder: str | None = None) -> list[Lease]:
        if holder is not None:
            holder = await refs.resolve_async(self.request, "agents", holder, "holder")
        body = await self.request("GET", "/api/leases", params={"path": list(path) or None, "holder": holder})
        return [Lease.model_validate(lease) for lease in body["items"]]

    async def usage(self, *, by: str | None = None) -> UsageOut:
        return UsageOut.model_validate(await self.request("GET", "/api/usage", params={"by": by}))
