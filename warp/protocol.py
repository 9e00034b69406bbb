"""This agent as an agent of Synadia's Agent Protocol for NATS (docs/interop.md).

Any caller of that protocol finds the agent (a NATS micro service named ``agents``, its
heartbeats on ``agents.hb.loom.<project>.<agent-id>``) and prompts it. A prompt becomes a
direct message in the agent's own inbox, from a sender id made for that prompt; the agent
answers it as it answers any message, with ``warp_messages_send_direct`` and ``reply_to``,
and the answer streams back to the caller as the protocol's response chunks. A reply with
``metadata: {"more": "true"}`` is one chunk of several; the first without it ends the stream.

With ``LOOM_AGENT_PROTOCOL=work`` a prompt is a work item of the project instead, for any
agent that can do it: the stream tells its states and ends with its result.

The protocol side (service registration, acks and keep-alives, heartbeats, the stream's
terminator, sender classification) is the protocol's own agent-host package; this module
maps it onto the inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from shared.limits import DESCRIPTION_MAX_LENGTH
from shared.models import FINAL_WORK_STATES, WorkStatus, new_id
from shared.names import AGENT_PROTOCOL_AGENT, AGENT_PROTOCOL_MESSAGE_TYPE
from shared.redact import redact
from warp.errors import WarpError

if TYPE_CHECKING:
    from synadia_ai.agent_service import AgentService, PromptStream
    from synadia_ai.agents import Envelope

    from shared.models import WorkItem
    from warp.messages import InboxMessage

log = logging.getLogger("loom.warp.protocol")

MAX_PROMPT_CHARS = 64_000
"""A direct message's body limit (shared.models.DirectMessage): a longer prompt is refused."""
MAX_CONCURRENT_PROMPTS = 16
"""Prompts one agent holds open at once; the next waits for a free one (in NATS)."""
ATTACHMENTS_DIR = Path(".loom") / "attachments"
"""Where a prompt's attachments are saved, in the agent's project folder, one folder per
prompt (its message id): the agent reads them there, on its own host."""
MAX_ATTACHMENT_BYTES = 8 * 1024 * 1024
"""Decoded bytes one prompt's attachments may write (more than a NATS message can carry)."""
REMEMBERED = 1_000
"""Ended prompts remembered, so a late reply is told the caller has gone, not misdelivered."""
MORE = "more"
"""``metadata: {"more": "true"}`` on a reply: a chunk, the stream goes on."""

Deliver = Callable[..., Awaitable["InboxMessage"]]
"""``InboxService.send`` with this agent's id and handle bound: puts a prompt in the inbox."""
Submit = Callable[[str, str], Awaitable["WorkItem"]]
"""Submits a prompt (its text, its caller) as a work item of the project."""
Follow = Callable[[str], AsyncGenerator["WorkItem", None]]
"""The item's states as they change (the current one first)."""


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
        project_path: Path,
        deliver: Deliver,
        prompts: ProtocolPrompts,
        wait_s: float,
        as_work: tuple[Submit, Follow] | None = None,
        signing_creds: str | None = None,
    ) -> None:
        """``as_work``: prompts become work items (submitted, then followed) instead of
        messages; ``signing_creds``: the connection's creds, whose user NKEY signs the
        service's registration and heartbeats (the protocol's sender-identity extension);
        ``project_path``: the agent's folder, where a prompt's attachments are saved (in work
        mode the endpoint takes none, and the protocol's package refuses them)."""
        self._nc = nc
        self._project_id = project_id
        self._agent_id = agent_id
        self._handle = handle
        self._deliver = deliver
        self.prompts = prompts
        self._wait_s = wait_s
        self._as_work = as_work
        self._signing_creds = signing_creds
        self._attachments = project_path / ATTACHMENTS_DIR
        self._service: AgentService | None = None

    async def start(self) -> None:
        # The protocol's package loads only when an agent serves it (it adds ed25519 and nkeys),
        # in a thread: its 0.2 s of imports must not hold up the tool calls answered meanwhile.
        module = await asyncio.to_thread(importlib.import_module, "synadia_ai.agent_service")
        identities = importlib.import_module("synadia_ai.agents.identity")
        identity_error: type[Exception] = importlib.import_module("synadia_ai.agents").IdentityError
        signed = self._signing_creds is not None
        try:
            signer = identities.signer_from_creds(self._signing_creds) if signed else None
            service = await self._serve(module, signer)
        except identity_error as exc:
            # The binding asks the server who this connection is (``$SYS.REQ.USER.INFO``,
            # answered on ``_INBOX.agents.>``): creds that may not do both serve unsigned.
            log.warning("agent protocol: serving unsigned (%s)", redact(exc))
            signed = False
            service = await self._serve(module, None)
        self._service = service
        log.info("serving the agent protocol on %s%s", service.subject.prompt, " (signed)" if signed else "")

    async def _serve(self, module: Any, signer: object | None) -> AgentService:
        """The protocol's service of this agent, started; its registration and heartbeats
        signed by ``signer`` (the sender-identity extension) when there is one."""
        service: AgentService = module.AgentService(
            identity=module.ServiceIdentity(signer=signer) if signer is not None else None,
            agent=AGENT_PROTOCOL_AGENT,
            owner=self._project_id,
            session_name=self._agent_id,
            nc=self._nc,
            description=f"Loom agent {self._handle}",
            extra_metadata={"loom_project": self._project_id, "loom_agent_id": self._agent_id},
            max_concurrent_prompts=MAX_CONCURRENT_PROMPTS,
            attachments_ok=self._as_work is None,  # saved to files (docs/interop.md)
        )
        service.on_prompt(self._on_prompt)
        await service.start()
        return service

    async def stop(self) -> None:
        service, self._service = self._service, None
        if service is not None:
            await service.stop()

    async def _on_prompt(self, envelope: Envelope, stream: PromptStream) -> None:
        from synadia_ai.agent_service import RequestRejectedError
        from synadia_ai.agents import format_sender

        text = envelope.prompt
        limit = MAX_PROMPT_CHARS if self._as_work is None else DESCRIPTION_MAX_LENGTH
        if len(text) > limit:
            raise RequestRejectedError(413, f"prompt: at most {limit} characters")
        if not text.strip():
            raise RequestRejectedError(400, "prompt: must not be empty")
        sender = format_sender(stream.sender) if stream.sender is not None else "an unidentified caller"
        if self._as_work is not None:
            await self._answer_by_work(text, sender[:200], stream)
            return
        message_id = new_id()
        metadata = {
            "protocol": "synadia-agents",
            "caller": sender[:200],
            "answer": "warp_messages_send_direct with reply_to set to this message's id",
            **(await self._saved(envelope, message_id)),
        }
        queue = self.prompts.open(message_id)
        try:
            await self._deliver(
                message_id=message_id,
                sender_id=new_id(),
                sender_handle="agent-protocol",
                body=text,
                message_type=AGENT_PROTOCOL_MESSAGE_TYPE,
                metadata=metadata,
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

    async def _saved(self, envelope: Envelope, message_id: str) -> dict[str, str]:
        """The prompt's attachments, written to files with the protocol package's own
        ``save_attachments`` (names made safe, nothing overwritten or reached through a link,
        private modes), as the message's metadata: ``attachments`` a JSON list of their paths,
        ``attachments_skipped`` what was not written and why."""
        from synadia_ai.agents import save_attachments

        if not envelope.attachments:
            return {}
        folder = self._attachments / message_id
        saved = await asyncio.to_thread(
            save_attachments, envelope.attachments, folder, max_total_bytes=MAX_ATTACHMENT_BYTES
        )
        paths = [str(a.path) for a in saved if a.path is not None]
        skipped = [f"#{i + 1} {a.skipped}" for i, a in enumerate(saved) if a.path is None]
        out = {"attachments": json.dumps(paths)}
        if skipped:
            out["attachments_skipped"] = ", ".join(skipped)
        return out

    async def _answer_by_work(self, text: str, caller: str, stream: PromptStream) -> None:
        """The prompt as a work item: each state it reaches is a status chunk, its result the
        answer; ending otherwise (cancelled, expired, dead-lettered) is an error of the stream."""
        from synadia_ai.agent_service import RequestRejectedError
        from synadia_ai.agents import StatusChunk

        assert self._as_work is not None
        submit, follow = self._as_work
        item = await submit(text, caller)
        # Its first state is told from the submission itself: by the time the watch has
        # started, the fleet may have claimed it already.
        told: WorkStatus | None = item.status
        await stream.send(StatusChunk(status=f"{item.status.value} {item.id}"))
        try:
            # closed as soon as the answer is out: its watch must not outlive the stream
            async with asyncio.timeout(self._wait_s), contextlib.aclosing(follow(item.id)) as changes:
                async for now in changes:
                    if now.status is not told:
                        told = now.status
                        await stream.send(StatusChunk(status=f"{now.status.value} {now.id}"))
                    if now.status is WorkStatus.COMPLETED:
                        result = now.result
                        await stream.send(result if isinstance(result, str) else json.dumps(result))
                        return
                    if now.status in FINAL_WORK_STATES:
                        raise RequestRejectedError(502, f"work item {now.id} ended {now.status.value}")
        except TimeoutError:
            raise RequestRejectedError(
                504,
                f"work item {item.id} did not complete within {self._wait_s:g}s "
                "(LOOM_AGENT_PROTOCOL_WAIT_S); it goes on",
            ) from None


async def item_changes(js: JetStreamContext, bucket: str, work_id: str) -> AsyncGenerator[WorkItem, None]:
    """The work item's states as its record changes, the current one first (one watch of its
    key in the work records bucket)."""
    from shared.nats.watch import KeyWatch
    from shared.work.rules import WorkRecord

    watch = await KeyWatch(js, bucket, work_id).start()
    try:
        async for change in watch:
            if change is not None and not change.removed:
                yield WorkRecord.model_validate_json(change.value).item
    finally:
        await watch.stop()
