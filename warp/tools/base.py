"""What Warp's tools share: the result shape, Warp's hooks into the tool builder, traces.

The tools are built by :func:`shared.mcp.tools.build_tools` (strict arguments,
coded errors, annotations: the same builder as Pattern's); :class:`WarpHost` is
what Warp adds to each call:

* anticipated failures beyond a ``LoomError`` (NATS away or slow, a pydantic
  error in a tool body) become refusals through :func:`warp.errors.as_loom_error`;
* every call counts as in flight (a shutdown drain waits for it), is bounded by
  3x the NATS operation timeout, and a successful result carries the drain
  notice while Warp is shutting down.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mcp_types import CallToolResult, TextContent
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from shared.errors import LoomError
from shared.mcp.tools import ToolHost
from warp.errors import as_loom_error

if TYPE_CHECKING:
    from shared.channels import ReadMessage
    from warp.messages import InboxMessage
    from warp.runtime import WarpRuntime
    from warp.services import Services


def result(payload: BaseModel, text: str) -> CallToolResult:
    """Structured content plus the human-readable rendering."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload.model_dump(mode="json"),
    )


class WarpHost(ToolHost):
    """Warp's hooks into the tool builder (see the module's docstring)."""

    def __init__(self, rt: WarpRuntime) -> None:
        super().__init__(server="Warp", log=logging.getLogger("loom.warp.tools"))
        self.rt = rt

    @property
    def time_limit_s(self) -> float:
        return self.rt.settings.op_timeout_s * 3

    def started(self, tool: str) -> None:
        self.rt.call_started()

    def ended(self, tool: str) -> None:
        self.rt.call_finished()

    def anticipated(self, exc: Exception) -> LoomError | None:
        return as_loom_error(exc, nats_url=self.rt.display_url)

    def finished(self, result: CallToolResult) -> CallToolResult:
        notice = self.rt.drain_notice()
        if notice:
            result.content.insert(0, TextContent(type="text", text=notice))
        return result


def about_held_work(svc: Services, name: str, destination: str) -> contextlib.AbstractContextManager[Any]:
    """A message sent while the agent holds one item is about it: a span of that item's
    trace, current while the message goes out, so the message carries that trace on
    (docs/operations.md, Traces). Otherwise nothing is recorded."""
    about = svc.presence.about()
    if about is None:
        return contextlib.nullcontext()
    work_id, traceparent = about
    return svc.traces.span(
        name,
        work_id=work_id,
        traceparent=traceparent,
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": destination},
        carry_work_id=True,
    )


def record_received(svc: Services, messages: Iterable[InboxMessage | ReadMessage], source: str) -> None:
    """The reading side of messages sent about a work item: a span in that item's timeline,
    a child of the sender's (docs/operations.md, Traces)."""
    for received in messages:
        if received.about is not None:
            work_id, traceparent = received.about
            with svc.traces.span(
                "message.receive",
                work_id=work_id,
                traceparent=traceparent,
                kind=SpanKind.CONSUMER,
                attributes={"messaging.system": "nats", "messaging.destination.name": source},
            ):
                pass
