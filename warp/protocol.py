"""This agent as an agent of Synadia's Agent Protocol for NATS (docs/interop.md).

Any caller of that protocol finds the agent (a NATS micro service named ``agents``, its
heartbeats on ``agents.hb.loom.<project>.<agent-id>``) and prompts it. A prompt becomes a
direct message in the agent's own inbox, from a sender id made for that prompt; the agent
answers it as it answers any message, with ``warp_messages_send_direct`` and ``reply_to``,
and the answer streams back to the caller as the protocol's response chunks. A reply with
``metadata: {"more": "true"}`` is one chunk of several; the first without it ends the stream.

The protocol side (service registration, acks and keep-alives, heartbeats, the stream's
terminator, sender classification) is the protocol's own agent-host package; this module
maps it onto the inbox.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nats.aio.client import Client as NatsClient

from shared.models import new_id
from shared.names import AGENT_PROTOCOL_AGENT, AGENT_PROTOCOL_MESSAGE_TYPE
from warp.errors import WarpError

if TYPE_CHECKING:
    from synadia_ai.agent_service import AgentService, PromptStream
    from synadia_ai.agents import Envelope

    from warp.messages import InboxMessage

log = logging.getLogger("loom.warp.protocol")

MAX_PROMPT_CHARS = 64_000
"""A direct message's body limit (shared.models.DirectMessage): a longer prompt is refused."""
MAX_CONCURRENT_PROMPTS = 16
"""Prompts one agent holds open at once; the next waits for a free one (in NATS)."""
REMEMBERED = 1_000
"""Ended prompts remembered, so a late reply is told the caller has gone, not misdelivered."""
MORE = "more"
"""``metadata: {"more": "true"}`` on a reply: a chunk, the stream goes on."""

Deliver = Callable[..., Awaitable["InboxMessage"]]
"""``InboxService.send`` with this agent's id and handle bound: puts a prompt in the inbox."""


@dataclass
class _Chunk:
    text: str
    more: bool


class ProtocolPrompts:
    """The prompts this agent holds open, by the id of the direct message each became."""

    def __init__(self) -> None:
        self._open: dict[str, asyncio.Queue[_Chunk]] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def open(self, message_id: str) -> asyncio.Queue[_Chunk]:
        queue: asyncio.Queue[_Chunk] = asyncio.Queue()
        self._open[message_id] = queue
        return queue

    def end(self, message_id: str) -> None:
        if self._open.pop(message_id, None) is not None:
            self._ended[message_id] = None
            while len(self._ended) > REMEMBERED:
                self._ended.popitem(last=False)

    def answers(self, reply_to: str | None) -> bool:
        """True when ``reply_to`` is a prompt of the protocol (open or ended lately)."""
        return reply_to is not None and (reply_to in self._open or reply_to in self._ended)

    def reply(self, reply_to: str, text: str, metadata: dict[str, str] | None) -> bool:
        """Hand one reply to the prompt's stream; False when it is no longer open (the caller
        stopped waiting, or the agent had already ended it)."""
        queue = self._open.get(reply_to)
        if queue is None:
            return False
        more = goes_on(metadata)
        queue.put_nowait(_Chunk(text, more))
        if not more:
            self.end(reply_to)
        return True

    @property
    def open_count(self) -> int:
        return len(self._open)


def goes_on(metadata: dict[str, str] | None) -> bool:
    """A reply with ``metadata: {"more": "true"}`` is one chunk of several."""
    return (metadata or {}).get(MORE, "").strip().lower() == "true"


def ended_reply_error() -> WarpError:
    return WarpError(
        "the protocol prompt it answers has ended (its caller stopped waiting, or a reply "
        f"without metadata {MORE}=true already ended it)",
        field="reply_to",
    )


class ProtocolEndpoint:
    """The agent's service of the protocol on ``nc``, for as long as the Warp runs."""

    def __init__(
        self,
        nc: NatsClient,
        *,
        project_id: str,
        agent_id: str,
        handle: str,
        deliver: Deliver,
        prompts: ProtocolPrompts,
        wait_s: float,
        description: str = "",
    ) -> None:
        self._nc = nc
        self._project_id = project_id
        self._agent_id = agent_id
        self._handle = handle
        self._deliver = deliver
        self.prompts = prompts
        self._wait_s = wait_s
        self._description = description
        self._service: AgentService | None = None

    async def start(self) -> None:
        # The protocol's package loads only when an agent serves it (it adds ed25519 and nkeys),
        # in a thread: its 0.2 s of imports must not hold up the tool calls answered meanwhile.
        module = await asyncio.to_thread(importlib.import_module, "synadia_ai.agent_service")
        service: AgentService = module.AgentService(
            agent=AGENT_PROTOCOL_AGENT,
            owner=self._project_id,
            session_name=self._agent_id,
            nc=self._nc,
            description=self._description or f"Loom agent {self._handle}",
            extra_metadata={"loom_project": self._project_id, "loom_agent_id": self._agent_id},
            max_concurrent_prompts=MAX_CONCURRENT_PROMPTS,
            attachments_ok=False,  # a direct message carries text alone (docs/interop.md)
        )
        service.on_prompt(self._on_prompt)
        await service.start()
        self._service = service
        log.info("serving the agent protocol on %s", service.subject.prompt)

    async def stop(self) -> None:
        service, self._service = self._service, None
        if service is not None:
            await service.stop()

    async def _on_prompt(self, envelope: Envelope, stream: PromptStream) -> None:
        from synadia_ai.agent_service import RequestRejectedError
        from synadia_ai.agents import format_sender

        text = envelope.prompt
        if len(text) > MAX_PROMPT_CHARS:
            raise RequestRejectedError(413, f"prompt: at most {MAX_PROMPT_CHARS} characters")
        if not text.strip():
            raise RequestRejectedError(400, "prompt: must not be empty")
        message_id = new_id()
        queue = self.prompts.open(message_id)
        try:
            sender = format_sender(stream.sender) if stream.sender is not None else "an unidentified caller"
            await self._deliver(
                message_id=message_id,
                sender_id=new_id(),
                sender_handle="agent-protocol",
                body=text,
                message_type=AGENT_PROTOCOL_MESSAGE_TYPE,
                metadata={
                    "protocol": "synadia-agents",
                    "caller": sender[:200],
                    "answer": "warp_messages_send_direct with reply_to set to this message's id",
                },
            )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._wait_s
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await queue.get()
                except TimeoutError:
                    raise RequestRejectedError(
                        504, f"the agent did not answer within {self._wait_s:g}s (LOOM_AGENT_PROTOCOL_WAIT_S)"
                    ) from None
                await stream.send(chunk.text)
                if not chunk.more:
                    return
        finally:
            self.prompts.end(message_id)
