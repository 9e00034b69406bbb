"""A2A 1.0's gRPC binding (issue 34): a real Weft serving it on a port of its own, the SDK's
gRPC client chosen from the card, the real work queue as the agent; the token as metadata
(UNAUTHENTICATED without it), the project as the tenant."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from a2a.client import Client, ClientCallContext, ClientConfig, create_client
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    SendMessageConfiguration,
    StreamResponse,
    TaskState,
    a2a_pb2,
    a2a_pb2_grpc,
)
from a2a.utils.constants import TransportProtocol
from google.rpc import error_details_pb2, status_pb2
from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, eventually, message, register

from shared.names import ProjectNames
from testsupport.work import work_queue

pytestmark = pytest.mark.timeout(120)

TOKEN = "a2a-grpc-token-1"
AUTH = ClientCallContext(service_parameters={"authorization": f"Bearer {TOKEN}"})


@pytest.fixture
async def weft(weft_factory: Any, project_id: str) -> AsyncIterator[Any]:
    async with weft_factory(project_id=project_id, api_tokens=TOKEN, a2a_grpc_port=0) as running:
        yield running


@asynccontextmanager
async def grpc_client(weft: Any, project: str, *, streaming: bool) -> AsyncIterator[Client]:
    async with weft.client() as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=streaming,
            supported_protocol_bindings=[TransportProtocol.GRPC.value],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = await create_client(f"{weft.base_url}/a2a/{project}", config)
        try:
            yield client
        finally:
            await client.close()


async def grpc_address(weft: Any, project_id: str) -> str:
    async with weft.client() as anyone:
        card = (await anyone.get(f"/a2a/{project_id}/.well-known/agent-card.json")).json()
    (interface,) = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert interface["tenant"] == project_id and interface["protocolVersion"] == "1.0"
    return str(interface["url"])


async def test_the_sdk_s_grpc_client_sends_streams_and_reads_a_task(
    weft: Any, nc: NatsClient, project_id: str
) -> None:
    assert (await grpc_address(weft, project_id)).startswith("127.0.0.1:")
    queue = work_queue(nc, ProjectNames(project_id))
    entry = await register(nc, project_id)

    async def agent() -> None:
        async def claim() -> Any:
            return await queue.claim(claimant(entry))

        item = await eventually(claim, timeout=20, what="the item to claim")
        await queue.complete(item.id, entry.agent_id, "lexed")

    async with grpc_client(weft, project_id, streaming=True) as client:
        working = asyncio.create_task(agent())
        events: list[StreamResponse] = [e async for e in client.send_message(message(), context=AUTH)]
        await working
        task_id = events[0].task.id
        states = [e.status_update.status.state for e in events if e.HasField("status_update")]
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        got = await client.get_task(GetTaskRequest(id=task_id), context=AUTH)
        assert (
            got.status.state == TaskState.TASK_STATE_COMPLETED and got.artifacts[0].parts[0].text == "lexed"
        )
        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=AUTH)
        assert [s.id for s in extended.skills] == ["code"]


async def test_without_a_token_a_call_is_unauthenticated_and_another_tenant_sees_nothing(
    weft: Any, project_id: str
) -> None:
    address = await grpc_address(weft, project_id)
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        request = a2a_pb2.GetTaskRequest(id="f" * 32, tenant=project_id)
        with pytest.raises(grpc.aio.AioRpcError) as anonymous:
            await stub.GetTask(request)
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "bearer token is required" in (anonymous.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await stub.GetTask(request, metadata=[("authorization", "Bearer s3cr3t-wrong")])
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED and "s3cr3t" not in (
            wrong.value.details() or ""
        )

        auth = [("authorization", f"Bearer {TOKEN}"), ("a2a-version", "1.0")]
        sent = await stub.SendMessage(
            a2a_pb2.SendMessageRequest(
                tenant=project_id,
                message=message().message,
                configuration=SendMessageConfiguration(return_immediately=True),
            ),
            metadata=auth,
        )
        elsewhere = a2a_pb2.GetTaskRequest(id=sent.task.id, tenant=f"{project_id}-b")
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetTask(elsewhere, metadata=auth)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as untenanted:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=auth)
        assert untenanted.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "tenant: required over gRPC" in (untenanted.value.details() or "")


def _reason(error: grpc.aio.AioRpcError) -> str:
    """The A2A reason in the call's rich status (``grpc-status-details-bin``)."""
    raw = dict(error.trailing_metadata() or ())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    assert status.code == error.code().value[0]  # the rich status agrees with the call's
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return str(info.reason)


async def test_a_version_other_than_1_x_and_an_unsupported_operation_end_unimplemented(
    weft: Any, project_id: str
) -> None:
    """A2A 1.0 §3.6.2 and §5.4: no ``a2a-version`` means 0.3, which this binding does not
    serve; a version it does not serve, and an operation it does not support, end
    ``UNIMPLEMENTED`` (the SDK would answer ``FAILED_PRECONDITION``)."""
    address = await grpc_address(weft, project_id)
    token = ("authorization", f"Bearer {TOKEN}")
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        request = a2a_pb2.GetTaskRequest(id="f" * 32, tenant=project_id)
        for version in ([], [("a2a-version", "0.3")], [("a2a-version", "99.0-s3cr3t")]):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTask(request, metadata=[token, *version])
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, version
            assert (refused.value.details() or "").startswith("a2a-version: the gRPC binding speaks A2A 1.0")
            assert "s3cr3t" not in str(refused.value.trailing_metadata())
            assert _reason(refused.value) == "VERSION_NOT_SUPPORTED"
        with pytest.raises(grpc.aio.AioRpcError) as served:  # a later 1.x is served as 1.0
            await stub.GetTask(request, metadata=[token, ("a2a-version", "1.1")])
        assert served.value.code() == grpc.StatusCode.NOT_FOUND

        auth = [token, ("a2a-version", "1.0")]
        queued = message()
        queued.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        queued.tenant = project_id
        sent = await stub.SendMessage(queued, metadata=auth)
        follow_up = message("Not waiting for this")
        follow_up.tenant = project_id
        follow_up.message.task_id = sent.task.id
        with pytest.raises(grpc.aio.AioRpcError) as unsupported:
            await stub.SendMessage(follow_up, metadata=auth)
        assert unsupported.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert _reason(unsupported.value) == "UNSUPPORTED_OPERATION"
        assert "not waiting for input" in (unsupported.value.details() or "")
