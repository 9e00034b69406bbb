"""Discovery on a server that holds many projects: the project's spin-ups bucket sits
beyond the first page of the JetStream stream listing and must still be found."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from nats.aio.client import Client as NatsClient

from shared.models import Target
from shared.nats.jsapi import stream_names
from shared.nats.server import EmbeddedNatsServer
from tests.spinup.conftest import EngineFactory, hook, stop_spinup
from tests.spinup.stubs import StubServer
from testsupport.servers import CROWD_STREAMS


@pytest.fixture
def nats_server(crowded_nats_server: EmbeddedNatsServer) -> EmbeddedNatsServer:
    return crowded_nats_server


async def test_discovery_finds_a_project_listed_past_the_first_page(
    engine_factory: EngineFactory,
    make_target: Callable[..., Awaitable[Target]],
    receiver: StubServer,
    nc: NatsClient,
    nats_server: EmbeddedNatsServer,
    project_id: str,
) -> None:
    first = await engine_factory()
    target = await make_target(
        name="hooked",
        mechanism="webhook",
        config=hook(receiver),
    )
    await (await first.manager(project_id)).spin_up(target.id)
    await (await first.manager(project_id)).drain(10)
    await stop_spinup(first, stop_agents=False)

    names = await stream_names(nc)
    assert len(names) > CROWD_STREAMS  # the listing really spans pages
    assert names.index(f"KV_loom-{project_id}-spinups") >= 1024

    restarted = await engine_factory()  # a Weft started later, serving no project yet
    assert project_id in await restarted.discover_projects()
