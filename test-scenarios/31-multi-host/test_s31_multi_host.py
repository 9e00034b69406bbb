"""Scenario 31: the fabric on three hosts, through partitions, node crashes and a slow link.

Three hosts are network namespaces on one switch (``scenario_harness/hosts.py``), each with
a node of a 3-node NATS cluster (R3 streams and buckets), two agents that work the queue
(one of them also contends for one file lease) and, on hosts 0 and 1, a Weft replica. The
drill stands on a fourth namespace, as the operator's machine: it submits work through
whichever Weft answers and drives the agents over MCP (stdio crosses namespaces).

Six fault cycles, load never stopping:

1. host 2 partitioned (its link down), healed;
2. node n1 SIGKILLed, restarted;
3. host 1 partitioned (a Weft replica with it), healed;
4. host 0's link slowed and lossy (netem delay and loss; where the kernel has no netem, a
   rate limit and the switch dropping 2% of the host's frames at random);
5. node n0 SIGKILLed, restarted;
6. host 2 partitioned again, healed.

During a partition, every Weft on the majority side must show the cut-off agents offline
(its decisions go on there), and the operator's submissions must still be acknowledged.
After each heal, every agent of the cut-off host completes work again. At the end, every
acknowledged item must complete; a history of every operation (``scenario_harness/history.py``)
must show no item completed twice, no lease granted to two holders at once, and fencing
tokens that grow across every fault.

Figures go to ``tmp/figures.json`` next to this file.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError, ServiceUnavailableError
from scenario_harness import Connection, WarpAgent, new_project_id
from scenario_harness.agents import warp_agent
from scenario_harness.cluster import jetstream_at, wait_jetstream
from scenario_harness.drills import (
    HELD,
    Figures,
    RestartableNats,
    WeftProcess,
    WorkerLog,
    call_retrying,
    until,
    work_records,
)
from scenario_harness.history import (
    Completion,
    Fault,
    Grant,
    History,
    Release,
    Submission,
    clock,
    double_grants,
    doubled,
    lost,
    token_disorder,
)
from scenario_harness.hosts import Hosts, inside, unavailable
from scenario_harness.mcp_process import BIN, text_of

from shared.models import AgentStatus
from shared.names import ProjectNames
from shared.nats.server import ClusterConfig, ServerConfig
from testsupport.mcp import is_outage

HERE = Path(__file__).parent
FIGURES = Figures(HERE / "tmp" / "figures.json")
HOSTS = 3
WEFT_HOSTS = (0, 1)
CLIENT_PORT, ROUTE_PORT, WEFT_PORT = 4222, 6222, 8080
HEARTBEAT_S = 1.0
LIVE = frozenset({AgentStatus.ONLINE.value, AgentStatus.BUSY.value})
"""An agent that beats: ``busy`` is as live as ``online`` (under the drill's load a worker is
busy most of the time, and one that wins every new item may never show ``online`` at a probe)."""
ENV = {"LOOM_JS_REPLICAS": "3", "LOOM_WORK_ACK_WAIT_S": "4", "LOOM_WARP_TIMEOUT_S": "3"}
CAPABILITY = "drill"
LEASED = ["drill/shared.txt"]
LEASE_TTL_S = 5.0
BACKLOG = 30
"""Submissions pause while this many acknowledged items are not yet completed."""
SUBMIT_EVERY_S = 0.25
"""The operator's pace: about four items a second, a dozen or more in every fault's window.
The invariants are judged per operation, not by throughput, and a drill that saturates two
cores (every agent claiming as fast as it can) costs the rest of the suite as much again."""
IDLE_CLAIM_S = 0.3
"""How long a worker whose claim found nothing waits before it claims again."""
CYCLES: tuple[tuple[str, int], ...] = (
    ("cut", 2),
    ("kill", 1),
    ("cut", 1),
    ("slow", 0),
    ("kill", 0),
    ("cut", 2),
)
HOLD_S = 5.0
"""How long each fault lasts at least (a partition lasts until its effects are seen)."""
RECOVERY_S = 90.0

pytestmark = [
    pytest.mark.drill,  # a stage of its own in CI (`make drill`), not in `make test`
    pytest.mark.skipif(unavailable() is not None, reason=f"multi-host drill: {unavailable()}"),
]


@dataclass
class Drill:
    hosts: Hosts
    folder: Path
    nodes: list[RestartableNats] = field(default_factory=list)
    wefts: dict[int, WeftProcess] = field(default_factory=dict)
    agents: dict[str, tuple[int, WarpAgent]] = field(default_factory=dict)
    history: History = field(default_factory=History)
    project_id: str = field(default_factory=lambda: new_project_id("hosts"))
    figures: dict[str, Any] = field(default_factory=dict)
    stop_submitting: asyncio.Event = field(default_factory=asyncio.Event)
    stop_working: asyncio.Event = field(default_factory=asyncio.Event)
    cut_off: set[int] = field(default_factory=set)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    last_said: dict[str, str] = field(default_factory=dict)
    """Each worker's latest call and what its agent answered (a failure says where each was)."""

    @property
    def nats_url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def on(self, host: int) -> list[tuple[str, WarpAgent]]:
        return [(handle, agent) for handle, (i, agent) in self.agents.items() if i == host]

    # -- the parts -------------------------------------------------------------------------------
    def make_nodes(self) -> None:
        routes = [f"nats-route://{self.hosts.ip(i)}:{ROUTE_PORT}" for i in range(HOSTS)]
        for i in range(HOSTS):
            config = ServerConfig(
                host=self.hosts.ip(i),
                port=CLIENT_PORT,
                server_name=f"n{i}",
                cluster=ClusterConfig(
                    name="loom-hosts", port=ROUTE_PORT, routes=routes[:i] + routes[i + 1 :]
                ),
            )
            self.nodes.append(RestartableNats(self.folder / f"n{i}", config))

    async def start_node(self, i: int) -> None:
        await asyncio.to_thread(inside, self.hosts.names[i], self.nodes[i].start)

    async def jetstream_ready(self, i: int) -> float:
        """Until JetStream answers through node ``i``; the seconds it took."""
        began = clock()
        await wait_jetstream(self.nodes[i].url, RECOVERY_S)
        return clock() - began

    async def replicated_streams_ready(self) -> None:
        """Until the cluster can create an R3 stream (all three peers known to its meta leader)."""
        async with jetstream_at(self.nats_url, name="drill-probe", timeout=10) as js:

            async def created() -> bool:
                with contextlib.suppress(Exception):
                    await js.add_stream(
                        StreamConfig(name="DRILL-PROBE", subjects=["drill.probe"], num_replicas=3)
                    )
                    await js.delete_stream("DRILL-PROBE")
                    return True
                return False

            await until(created, timeout=RECOVERY_S, what="an R3 stream created", interval=0.5)

    async def settled(self) -> float:
        """Until every stream has a leader and two current replicas with no lag: the cluster
        has recovered from the last fault (R3 tolerates one at a time); the seconds it took."""
        behind: list[str] = []
        async with jetstream_at(self.nats_url, name="drill-settle") as js:

            async def all_current() -> bool:
                behind.clear()
                try:
                    streams = await js.streams_info()
                except (ServiceUnavailableError, NatsTimeoutError):  # a meta leader being elected
                    behind.append("JetStream temporarily unavailable")
                    return False
                for info in streams:
                    cluster, name = info.cluster, info.config.name
                    replicas = (cluster.replicas or []) if cluster is not None else []
                    if cluster is None or not cluster.leader or len(replicas) != HOSTS - 1:
                        behind.append(f"{name}: no leader or replicas missing")
                    behind.extend(
                        f"{name}: {r.name} lags {r.lag}" for r in replicas if not r.current or r.lag
                    )
                return not behind

            return await until(
                all_current,
                timeout=RECOVERY_S,
                what="every stream current on all three nodes",
                interval=0.5,
                explain=lambda: "; ".join(behind[:6]),
            )

    async def all_online(self) -> float:
        """Until every Weft shows every agent online (nobody left offline by a fault that
        has ended); the seconds it took."""
        shown: dict[str, str] = {}

        async def online() -> bool:
            for w, weft in self.wefts.items():
                for handle, (_, agent) in self.agents.items():
                    shown[f"{handle}@weft{w}"] = await self.agent_status(weft, agent)
            return all(status in LIVE for status in shown.values())

        return await until(
            online,
            timeout=RECOVERY_S,
            what="every agent online in every Weft",
            interval=0.3,
            explain=lambda: (
                str({k: v for k, v in shown.items() if v not in LIVE}) + f"\nworkers: {self.last_said}"
            ),
        )

    async def queue_state(self, item_ids: list[str]) -> str:
        """The work queue as NATS holds it, and where the given items' queue messages are."""
        names = ProjectNames(self.project_id)
        async with jetstream_at(self.nats_url, name="drill-audit") as js:
            state = (await js.stream_info(names.work_stream)).state
            lines = [
                f"work stream: first {state.first_seq}, last {state.last_seq}, {state.messages} messages"
            ]
            for c in await js.consumers_info(names.work_stream):
                lines.append(
                    f"consumer {c.name} ({c.config.filter_subject}): pending {c.num_pending}, "
                    f"ack pending {c.num_ack_pending}, redelivered {c.num_redelivered}, "
                    f"delivered {c.delivered.stream_seq if c.delivered else None}, "
                    f"ack floor {c.ack_floor.stream_seq if c.ack_floor else None}, waiting {c.num_waiting}"
                )
            kv = await js.key_value(names.work_records_bucket)
            for item_id in item_ids[:8]:
                record = json.loads((await kv.get(item_id)).value or b"{}")
                seq = record.get("queue_seq")
                present = "?"
                if seq:
                    try:
                        await js.get_msg(names.work_stream, seq)
                        present = "yes"
                    except NotFoundError:
                        present = "no"
                lines.append(
                    f"{item_id}: queue_seq {seq}, enqueues {record.get('enqueues')}, in stream: {present}"
                )
            return "\n".join(lines)

    def weft_on(self, i: int) -> WeftProcess:
        settings = {"WEFT_STALE_CHECK_INTERVAL_S": "0.5", "WEFT_SWEEP_INTERVAL_S": "0.5"}
        process = WeftProcess(
            self.nodes[i].url,
            self.folder / f"weft{i}",
            env=ENV | settings,
            host=self.hosts.ip(i),
            launch=self.hosts.launch(i),
            token=self.token,
        )
        process.port = WEFT_PORT
        return process

    def majority_wefts(self) -> list[WeftProcess]:
        return [weft for i, weft in self.wefts.items() if i not in self.cut_off]

    async def agent_status(self, weft: WeftProcess, agent: WarpAgent) -> str:
        """The agent's status as ``weft`` shows it, or what kept it from saying."""
        try:
            async with weft.running_weft.client(self.project_id) as api:
                api.timeout = httpx.Timeout(3.0)
                response = await api.get(f"/api/agents/{agent.agent_id}")
        except (httpx.HTTPError, OSError) as exc:
            return f"no answer ({type(exc).__name__})"
        if response.status_code != 200:
            return f"HTTP {response.status_code} {response.text[:120]}"
        return str(response.json()["status"])

    async def start_agent(self, agent: WarpAgent) -> None:
        """Handshake and register; the first registrations create the project's R3 buckets,
        which a young cluster may take longer for than one tool call waits. A step that
        does not answer in time is named, with how long the start had taken and what the
        agent said (a bare timeout from a loaded CI run told nothing)."""
        began, step = clock(), "the MCP handshake"
        try:
            await agent.initialize()
            step = "waiting for Warp to reach NATS"
            await agent.wait_ready()
            step = "registering"
            log = WorkerLog(agent.handle)
            out = await call_retrying(agent, "warp_registry_register", log, give_up=RECOVERY_S)
        except TimeoutError:
            raise AssertionError(
                f"{agent.handle}: no answer in time while {step}, {clock() - began:.1f}s into its "
                f"start\n--- its stderr (tail) ---\n{agent.stderr()[-1500:]}"
            ) from None
        assert isinstance(out, dict), f"{agent.handle} could not register: {out}"
        took = f"{clock() - began:.1f}s" + (f", {log.errors} refused registration(s)" if log.errors else "")
        self.figures.setdefault("agent_start", {})[agent.handle] = took

    # -- load ------------------------------------------------------------------------------------
    async def submitter(self) -> None:
        """Submit through the Wefts in turn (the other one when a Weft does not answer)."""
        wefts = list(self.wefts.values())
        clients = [weft.running_weft.client(self.project_id) for weft in wefts]
        try:
            for n in itertools.count():
                if self.stop_submitting.is_set():
                    return
                if self.history.outstanding() > BACKLOG:
                    await asyncio.sleep(0.1)
                    continue
                first = n % len(clients)
                for k in (first, 1 - first):
                    asked = clock()
                    body = {
                        "task_id": f"drill-{n}",
                        "description": f"drill item {n}",
                        "capability": CAPABILITY,
                        # Each fault can take an item's claim away (its holder cut off or
                        # its node killed); the drill checks that none is lost, not how
                        # many retries an item needs: three faults on one item would
                        # otherwise dead-letter it (seen once in CI).
                        "max_attempts": 20,
                    }
                    item_id: str | None = None
                    with contextlib.suppress(httpx.HTTPError):
                        response = await clients[k].post("/api/work", json=body, timeout=2.0)
                        if response.status_code == 201:
                            item_id = str(response.json()["id"])
                    self.history.submissions.append(Submission(asked, clock(), item_id, via=f"weft{k}"))
                    if item_id is not None:
                        break
                await asyncio.sleep(SUBMIT_EVERY_S)
        finally:
            for client in clients:
                await client.aclose()

    async def worker(self, handle: str, agent: WarpAgent) -> None:
        """Claim and complete until told to stop; every accepted completion goes in the history."""
        while not self.stop_working.is_set():
            self.last_said[handle] = "claiming"
            result = await agent.raw("warp_work_claim")
            text = text_of(result)
            self.last_said[handle] = f"claim: {text[:160]}"
            held = HELD.search(text) if result.is_error else None
            if held is not None:
                item_id = held.group(1)  # a claim that stood while its answer was lost
            elif result.is_error or not (result.structured_content or {}).get("claimed"):
                await asyncio.sleep(0.2 if result.is_error else IDLE_CLAIM_S)
                continue
            else:
                item_id = str((result.structured_content or {})["item"]["id"])
            await asyncio.sleep(0.05)
            deadline = clock() + 30
            while clock() < deadline:
                asked = clock()
                self.last_said[handle] = f"completing {item_id}"
                done = await agent.raw("warp_work_complete", work_id=item_id, result={"by": handle})
                self.last_said[handle] = f"complete {item_id}: {text_of(done)[:160]}"
                step = Completion(item_id, handle, asked, clock())
                if not done.is_error:
                    self.history.completions.append(step)
                    break
                if not is_outage(done):  # a definite refusal: the claim lapsed meanwhile
                    self.history.refused_completions.append(step)
                    break
                await asyncio.sleep(0.2)

    async def leaser(self, handle: str, agent: WarpAgent) -> None:
        """Contend for one path: acquire, hold briefly, release; every grant and release kept."""
        while not self.stop_working.is_set():
            asked = clock()
            result = await agent.raw("warp_lease_acquire", patterns=LEASED, ttl_s=LEASE_TTL_S, reason="drill")
            answered = clock()
            if result.is_error:
                await asyncio.sleep(random.uniform(0.05, 0.3))
                continue
            lease = (result.structured_content or {})["lease"]
            self.history.grants.append(
                Grant(
                    lease_id=lease["id"],
                    holder=handle,
                    token=int(lease["token"]),
                    asked=asked,
                    answered=answered,
                    acquired_at=datetime.fromisoformat(lease["acquired_at"]),
                    expires_at=datetime.fromisoformat(lease["expires_at"]),
                )
            )
            await asyncio.sleep(0.3)
            deadline = clock() + 30
            while True:
                asked = clock()
                released = await agent.raw("warp_lease_release", lease_id=lease["id"])
                ok = not released.is_error
                if ok or not is_outage(released) or clock() > deadline:
                    self.history.releases.append(Release(lease["id"], asked, clock(), ok))
                    break
                await asyncio.sleep(0.2)

    # -- faults ----------------------------------------------------------------------------------
    def window(self, began: float, ended: float) -> dict[str, Any]:
        """What the history holds between two moments (for failure messages)."""
        asked = [s for s in self.history.submissions if began <= s.asked <= ended]
        return {
            "seconds": round(ended - began, 1),
            "submissions": len(asked),
            "acknowledged": sum(1 for s in asked if s.item_id),
            "completions": sum(1 for c in self.history.completions if began <= c.asked <= ended),
            "backlog": self.history.outstanding(),
        }

    async def majority_works(self, began: float, when: str) -> float:
        """Until, since ``began``, a submission was acknowledged and an item completed: the
        seconds it took (streams whose leader was cut off elect a new one first)."""

        def going_on() -> bool:
            acknowledged = any(s.item_id and s.asked > began for s in self.history.submissions)
            return acknowledged and any(c.asked > began for c in self.history.completions)

        return await until(
            going_on,
            timeout=RECOVERY_S,
            what=f"work submitted and completed {when}",
            explain=lambda: str(self.window(began, clock())),
        )

    def completed_since(self, handle: str, moment: float) -> bool:
        return any(c.agent == handle and c.asked > moment for c in self.history.completions)

    async def cut(self, i: int) -> dict[str, Any]:
        began = clock()
        self.hosts.cut(i)
        self.cut_off.add(i)
        victims = self.on(i)

        async def all_offline() -> bool:
            for weft in self.majority_wefts():
                for _, agent in victims:
                    if await self.agent_status(weft, agent) != "offline":
                        return False
            return True

        detected = await until(
            all_offline, timeout=RECOVERY_S, what=f"host {i}'s agents shown offline", interval=0.3
        )
        majority = await self.majority_works(began, f"while host {i} is cut off")
        await asyncio.sleep(max(0.0, HOLD_S - (clock() - began)))
        healed = clock()
        acknowledged = [
            s for s in self.history.submissions if began <= s.asked and s.answered <= healed and s.item_id
        ]
        self.hosts.heal(i)
        self.cut_off.discard(i)

        async def back() -> bool:
            for weft in self.wefts.values():
                for _, agent in victims:
                    if await self.agent_status(weft, agent) not in LIVE:
                        return False
            return all(self.completed_since(handle, healed) for handle, _ in victims)

        resumed = await until(
            back, timeout=RECOVERY_S, what=f"host {i}'s agents online and working again", interval=0.3
        )
        self.history.faults.append(Fault(f"cut h{i}", began, clock()))
        return {
            "offline_seen_s": round(detected, 2),
            "majority_went_on_s": round(majority, 2),
            "acknowledged_while_cut": len(acknowledged),
            "resumed_s": round(resumed, 2),
        }

    async def kill(self, i: int) -> dict[str, Any]:
        began = clock()
        self.nodes[i].kill()
        going_on = await self.majority_works(began, f"while node n{i} is down")
        await asyncio.sleep(max(0.0, HOLD_S - (clock() - began)))
        kept_working = sum(1 for c in self.history.completions if c.asked > began)
        await self.start_node(i)
        restarted = clock()
        rejoined = await self.jetstream_ready(i)

        async def working() -> bool:
            return all(self.completed_since(handle, restarted) for handle, _ in self.on(i))

        resumed = await until(
            working, timeout=RECOVERY_S, what=f"host {i}'s agents working after n{i} came back"
        )
        self.history.faults.append(Fault(f"kill n{i}", began, clock()))
        return {
            "majority_went_on_s": round(going_on, 2),
            "completed_while_down": kept_working,
            "rejoined_s": round(rejoined, 2),
            "resumed_s": round(resumed, 2),
        }

    async def slow(self, i: int) -> dict[str, Any]:
        began = clock()
        link = self.hosts.slow(i)
        try:
            await asyncio.sleep(HOLD_S)
            while_slow = sum(1 for c in self.history.completions if c.asked > began)
            dropped = self.hosts.dropped(i)
        finally:
            self.hosts.unslow(i)
        assert while_slow, f"no work completed while host {i}'s link was slow"
        if link.kind == "tbf+nft":
            assert dropped, f"the switch dropped none of host {i}'s frames while its link was lossy"
        self.history.faults.append(Fault(f"slow h{i}", began, clock()))
        return {
            "link": link.kind,
            "detail": link.detail,
            "netem": link.netem_refused or "yes",
            "loss": link.loss_refused or "yes",
            "frames_dropped": dropped,
            "completed": while_slow,
        }


@contextlib.asynccontextmanager
async def fabric(hosts: Hosts, folder: Path) -> AsyncIterator[Drill]:
    drill = Drill(hosts, folder)
    drill.make_nodes()
    async with AsyncExitStack() as stack:
        stack.callback(lambda: [node.kill() for node in drill.nodes])
        await asyncio.gather(*(drill.start_node(i) for i in range(HOSTS)))
        await asyncio.gather(*(drill.jetstream_ready(i) for i in range(HOSTS)))
        await drill.replicated_streams_ready()
        for i in WEFT_HOSTS:  # one after the other: the first creates the project's streams
            weft = drill.wefts[i] = drill.weft_on(i)
            stack.push_async_callback(weft.kill)
            await weft.start()
        workdir = folder / "agents"
        for i in range(HOSTS):
            for role in ("a", "b"):
                handle = f"h{i}-{role}"
                agent = await stack.enter_async_context(
                    warp_agent(
                        Connection(drill.nodes[i].url),
                        drill.project_id,
                        workdir,
                        handle,
                        capabilities=[CAPABILITY],
                        heartbeat_s=HEARTBEAT_S,
                        extra_env=ENV,
                        launch=[*hosts.launch(i), str(BIN / "warp")],
                        defer_start=True,
                    )
                )
                drill.agents[handle] = (i, agent)
        yield drill


async def run(hosts: Hosts, folder: Path) -> None:
    """The drill; its own failure is raised as it is, not inside the agents' task groups."""
    began = clock()
    failure: Exception | None = None
    async with fabric(hosts, folder) as drill:
        try:
            await asyncio.gather(*(drill.start_agent(agent) for _, agent in drill.agents.values()))
            drill.figures["start_s"] = round(clock() - began, 1)
            await exercise(drill, began)
        except Exception as exc:
            failure = exc
            failure.add_note(f"the drill failed {clock() - began:.1f}s in; figures so far: {drill.figures}")
    if failure is not None:
        raise failure


async def exercise(drill: Drill, began: float) -> None:
    """Load, the six faults, the drain, then the invariants on the history."""
    loops = [asyncio.create_task(drill.submitter(), name="submitter")]
    for handle, (_, agent) in drill.agents.items():
        loops.append(asyncio.create_task(drill.worker(handle, agent), name=f"worker-{handle}"))
        if handle.endswith("-a"):
            loops.append(asyncio.create_task(drill.leaser(handle, agent), name=f"leaser-{handle}"))
    try:
        await until(
            lambda: len(drill.history.completions) >= 10, timeout=RECOVERY_S, what="first completions"
        )
        for n, (kind, i) in enumerate(CYCLES, 1):
            step = {"cut": drill.cut, "kill": drill.kill, "slow": drill.slow}[kind]
            figures = await step(i)
            figures["settled_s"] = round(await drill.settled(), 2)
            figures["all_online_s"] = round(await drill.all_online(), 2)
            drill.figures[f"{n} {kind} {'h' if kind != 'kill' else 'n'}{i}"] = figures
        drill.stop_submitting.set()
        acknowledged = drill.history.acknowledged()

        missing: dict[str, Any] = {}

        async def all_done() -> bool:
            records = await work_records(drill.nats_url, drill.project_id)
            missing.clear()
            missing.update({i: records.get(i) for i in lost(drill.history, records)})
            return not missing

        def unfinished() -> str:
            fields = ("status", "attempts", "assigned_to", "updated_at")
            shown = {i: {k: (r or {}).get(k) for k in fields} for i, r in list(missing.items())[:5]}
            return f"{len(missing)} unfinished, e.g. {shown}"

        try:
            drained = await until(
                all_done,
                timeout=RECOVERY_S,
                what="every acknowledged item completed",
                interval=0.5,
                explain=unfinished,
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\n{await drill.queue_state(list(missing))}\nworkers: {drill.last_said}"
            ) from None
    finally:
        drill.stop_submitting.set()
        drill.stop_working.set()
        finished, _ = await asyncio.wait(loops, timeout=60)
        for task in loops:
            if task not in finished:
                task.cancel()
    for task in finished:
        if not task.cancelled() and (error := task.exception()) is not None:
            error.add_note(f"raised by the drill's {task.get_name()} (workers: {drill.last_said})")
            raise error
    history = drill.history
    records = await work_records(drill.nats_url, drill.project_id)
    figures = drill.figures | history.counts()
    figures |= {
        "lost": len(lost(history, records)),
        "doubled": len(doubled(history)),
        "double_grants": len(double_grants(history)),
        "token_disorder": len(token_disorder(history)),
        "drained_s": round(drained, 1),
        "total_s": round(clock() - began, 1),
    }
    weft_logs = [log.read_text(errors="replace") for log in drill.folder.glob("weft*/*.log")]
    # Weft's repairs (weft/project/repair.py): a queued item's message gone, queued again;
    # a held item's message gone, its claim lapsed and the item queued again.
    figures["requeued_lost_messages"] = sum(
        text.count("queued, but its queue message is gone") for text in weft_logs
    )
    figures["lapsed_lost_claims"] = sum(
        text.count("held, but its queue message is gone") for text in weft_logs
    )
    FIGURES.record("multi_host", figures)
    assert len(history.faults) == len(CYCLES) >= 5
    assert len(acknowledged) >= 50, figures
    assert lost(history, records) == [], "acknowledged items never completed"
    assert doubled(history) == {}, "items completed twice"
    assert double_grants(history) == [], "a lease granted to two holders at once"
    assert token_disorder(history) == [], "fencing tokens out of order"
    assert len(history.grants) >= 20, f"too few grants to tell anything: {figures}"


@pytest.mark.timeout(900)
def test_three_hosts_through_partitions_crashes_and_a_slow_link(tmp_path: Path) -> None:
    hosts = Hosts(HOSTS)
    try:
        hosts.create()
        inside(hosts.ops, lambda: asyncio.run(run(hosts, tmp_path)))
    finally:
        hosts.destroy()
