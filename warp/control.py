"""Requests from Weft on this agent's control subject.

``shutdown``: drain (stop claiming, let in-flight tool calls and held work
finish within the grace period), mark the entry offline and exit.
``cancel-work``: remembered, so the agent's next tool call about that work
item says plainly that it was cancelled and by whom.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from shared.models import ControlRequest
from shared.names import ProjectNames
from shared.nats.client import settle

log = logging.getLogger("loom.warp.control")

MAX_REMEMBERED = 1_000

Handler = Callable[[ControlRequest], Awaitable[None]]


class CancelledWork:
    """Work items cancelled while this agent held them (bounded, oldest forgotten first)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, ControlRequest] = OrderedDict()

    def add(self, request: ControlRequest) -> None:
        if request.work_id:
            self._items[request.work_id] = request
            self._items.move_to_end(request.work_id)
            while len(self._items) > MAX_REMEMBERED:
                self._items.popitem(last=False)

    def get(self, work_id: str) -> ControlRequest | None:
        return self._items.get(work_id)

    def message(self, work_id: str) -> str | None:
        request = self.get(work_id)
        if request is None:
            return None
        why = f": {request.reason}" if request.reason else ""
        return (
            f"work_id: {work_id} was cancelled by {request.requested_by}{why}; "
            "stop working on it (nothing more to report)"
        )


class ControlListener:
    def __init__(self, nc: NatsClient, names: ProjectNames, agent_id: str, on_request: Handler) -> None:
        self._nc = nc
        self._subject = names.control_subject(agent_id)
        self._agent_id = agent_id
        self._on_request = on_request
        self._sub: Subscription | None = None

    async def start(self) -> None:
        if self._sub is None:
            self._sub = await self._nc.subscribe(self._subject, cb=self._handle)
            # The server has the subscription before Warp reports ready: a shutdown request
            # sent right after registration must find a listener.
            await settle(self._nc)

    async def stop(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            try:
                await sub.unsubscribe()
            except Exception as exc:  # connection already gone
                log.debug("control unsubscribe: %s", exc)

    async def _handle(self, msg: Msg) -> None:
        try:
            request = ControlRequest.model_validate_json(msg.data)
        except ValidationError as exc:
            log.warning("ignoring malformed control request on %s: %s", self._subject, exc.errors()[:1])
            if msg.reply:
                await self._nc.publish(
                    msg.reply, json.dumps({"ok": False, "error": "malformed request"}).encode()
                )
            return
        log.info("control request: %s (by %s) %s", request.action, request.requested_by, request.reason)
        if msg.reply:
            await self._nc.publish(
                msg.reply,
                json.dumps({"ok": True, "agent_id": self._agent_id, "action": request.action}).encode(),
            )
        await self._on_request(request)
