"""Context trees (docs/context.md): path root -> node against depth, the structure of a
subtree against its size, and the budgeted context build.

Structure is measured after another process appended a node (the kept shape grows by one
row), after an update (one row replaced), on an unchanged tree, and built whole (a cold
copy). Reads are measured the way Warp and Weft serve them: through ``ContextStore.tree()`` (one
batched direct get from the copy's last sequence: nothing new comes back when nothing
changed) and then the in-memory read. Raw nats-py baselines in the same run: one direct get
of the tree's newest node (the round trip every read pays) and reading every node of the
tree with an ordered consumer (what a read without the copy would cost). A cold read (a
process that has never seen the tree) is measured too.

The context build: a Pattern service whose index holds 10,000 memories (own, team, a
parent's), a 1,000-node work tree, a budget of 8,000 tokens; warm (token counts cached,
as after the first build) and the first build of a fresh service.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid
from datetime import timedelta

from benchlib import BenchContext, BenchResult, summarize, time_async
from nats.js.api import DeliverPolicy

from pattern.config import PatternConfig
from pattern.inputs import BuildContextInput, PackInput, RestoreInput
from pattern.keys import memory_key
from pattern.models import Category, MemoryRecord, Scope, utcnow
from pattern.service import MemoryService
from shared.context import tokens
from shared.context.reads import leaves, structure
from shared.context.store import ContextStore
from shared.context.trees import ContextNode, TreeMeta
from shared.identity import Identity
from shared.names import ProjectNames, kv_stream, kv_subject
from shared.nats.client import connect

DEPTHS = (10, 100, 1_000)
SIZES = (100, 1_000, 10_000)
MEMORIES = 10_000
WORK_NODES = 1_000
BUDGET = 8_000
AUTHOR = "a" * 32
WORDS = ("parser", "lexer", "token", "grammar", "cache", "retry", "deploy", "schema", "index", "queue")


def _text(rng: random.Random, words: int = 24) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def _publish(store: ContextStore, nodes: list[ContextNode]) -> None:
    for start in range(0, len(nodes), 250):
        await asyncio.gather(*(store.publish(n) for n in nodes[start : start + 250]))


async def _chain(store: ContextStore, depth: int, rng: random.Random) -> tuple[str, str]:
    tree = uuid.uuid4().hex
    nodes = [ContextNode(tree_id=tree, author=AUTHOR, text="root", tree=TreeMeta(title=f"chain {depth}"))]
    for _ in range(depth):
        nodes.append(ContextNode(tree_id=tree, parent_id=nodes[-1].id, author=AUTHOR, text=_text(rng)))
    await _publish(store, nodes)
    return tree, nodes[-1].id


async def _bushy(store: ContextStore, size: int, rng: random.Random) -> str:
    """A tree of ``size`` nodes: each under one of the 50 before it (deep and branching)."""
    tree = uuid.uuid4().hex
    nodes = [ContextNode(tree_id=tree, author=AUTHOR, text="root", tree=TreeMeta(title=f"tree {size}"))]
    for _ in range(size - 1):
        parent = rng.choice(nodes[-50:])
        nodes.append(ContextNode(tree_id=tree, parent_id=parent.id, author=AUTHOR, text=_text(rng)))
    await _publish(store, nodes)
    return tree


async def _raw_read_all(js: object, stream: str, subject: str, count: int) -> None:
    """Every message of the subject through nats-py's ordered consumer (the raw baseline)."""
    seen = 0
    done = asyncio.Event()

    async def on_msg(_msg: object) -> None:
        nonlocal seen
        seen += 1
        if seen >= count:
            done.set()

    sub = await js.subscribe(  # type: ignore[attr-defined]
        subject, stream=stream, cb=on_msg, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await sub.unsubscribe()


def _identity(project: str, scratch: object, agent: str, parent: str | None = None) -> Identity:
    return Identity(
        project_id=project,
        project_path=scratch,  # type: ignore[arg-type]
        agent_id=agent,
        base_agent_id=agent,
        hostname="bench",
        handle="bench",
        agent_type="generic",
        user_id="0" * 16,
        parent_id=parent,
        subagent_type="coder" if parent else None,
    )


async def _memories(js: object, bucket: str, me: str, parent: str, project: str, rng: random.Random) -> None:
    """10,000 memories: the agent's own (core, longterm, recent), its parent's private ones and
    other agents' team decisions and learnings."""
    now = utcnow()
    records = []
    for i in range(MEMORIES):
        roll = rng.random()
        if roll < 0.01:
            owner, scope, category = me, Scope.PRIVATE, Category.CORE
        elif roll < 0.35:
            owner, scope, category = me, Scope.PRIVATE, rng.choice((Category.LONGTERM, Category.RECENT))
        elif roll < 0.50:
            owner, scope, category = parent, Scope.PRIVATE, Category.LONGTERM
        else:
            owner, scope, category = (
                secrets.token_hex(16),
                Scope.TEAM,
                rng.choice((Category.DECISIONS, Category.LEARNINGS)),
            )
        at = now - timedelta(seconds=MEMORIES - i)
        records.append(
            MemoryRecord(
                scope=scope,
                category=category,
                content=f"memory {i}: {_text(rng, 30)}",
                priority=rng.randint(1, 10),
                agent_id=owner,
                project_id=project,
                user_id="0" * 16,
                handle="bench",
                created_at=at,
                updated_at=at,
                expires_at=at + timedelta(hours=24) if category is Category.RECENT else None,
            )
        )
    for start in range(0, len(records), 250):
        await asyncio.gather(
            *(
                js.publish(  # type: ignore[attr-defined]
                    kv_subject(bucket, memory_key(r.scope, r.agent_id, r.category, r.id)),
                    r.model_dump_json().encode(),
                    stream=kv_stream(bucket),
                )
                for r in records[start : start + 250]
            )
        )


async def run(ctx: BenchContext) -> list[BenchResult]:
    nc = await connect(url=ctx.nats_url, name="bench-context")
    js = nc.jetstream()
    results: list[BenchResult] = []
    iterations = ctx.iterations(300, 20)
    rng = random.Random(16)
    try:
        names = ProjectNames(f"bench-ctx-{uuid.uuid4().hex[:8]}")
        store = ContextStore(nc, names)
        await store.ensure()

        deepest = ""
        for depth in DEPTHS:
            tree, leaf = await _chain(store, depth, rng)
            await store.tree(tree)

            async def path(tree: str = tree, leaf: str = leaf) -> None:
                (await store.tree(tree)).path(leaf)

            results.append(
                summarize(
                    f"context path @ {depth} depth",
                    await time_async(path, iterations),
                    baseline="context raw: direct get of a tree's newest node",
                    target="p95 <= 10 ms at 1,000" if depth == DEPTHS[-1] else None,
                    extra={"depth": depth},
                )
            )
            deepest = tree
        subject = names.context_subject(deepest)
        # time travel: the chain as it stood before ten of its nodes were updated
        chain = await store.tree(deepest)
        before = chain.max_seq
        for first in rng.sample(chain.order[1:], 10):
            newest = chain.latest(first)
            await store.publish(
                ContextNode(
                    tree_id=deepest,
                    parent_id=newest.parent_id,
                    supersedes=newest.id,
                    author=AUTHOR,
                    text="v2",
                )
            )
        chain = await store.tree(deepest)
        deep_leaf = chain.order[-1]

        async def path_now() -> None:
            (await store.tree(deepest)).path(deep_leaf)

        async def path_then() -> None:
            (await store.tree(deepest)).path_at(deep_leaf, before)

        results.append(
            summarize(
                "context path (now, 10 nodes updated) @1,000 depth",
                await time_async(path_now, iterations),
                baseline="context raw: direct get of a tree's newest node",
            )
        )
        results.append(
            summarize(
                "context path as of before the updates @1,000 depth",
                await time_async(path_then, iterations),
                baseline="context path (now, 10 nodes updated) @1,000 depth",
                target="within 2x of the path now",
                extra={"depth": DEPTHS[-1], "updated_since": 10},
            )
        )

        async def raw_newest() -> None:
            await js.get_last_msg(names.context_stream, subject, direct=True)

        results.append(
            summarize(
                "context raw: direct get of a tree's newest node", await time_async(raw_newest, iterations)
            )
        )

        async def cold_path() -> None:
            fresh = ContextStore(nc, names)
            fresh._ensured = True  # the stream exists: measure the read alone
            state = await fresh.tree(deepest)
            state.path(state.order[-1])

        results.append(
            summarize(
                "context path, cold copy @1,000 depth",
                await time_async(cold_path, ctx.iterations(30, 3), warmup=1),
                baseline="context raw: read every node @1,000",
            )
        )

        async def raw_chain() -> None:
            await _raw_read_all(js, names.context_stream, subject, DEPTHS[-1] + 1)

        results.append(
            summarize(
                "context raw: read every node @1,000",
                await time_async(raw_chain, ctx.iterations(30, 3), warmup=1),
            )
        )

        biggest = ""
        for size in SIZES:
            tree = await _bushy(store, size, rng)
            state = await store.tree(tree)
            parents = list(state.order)
            samples: list[float] = []
            for i in range(ctx.iterations(200, 10) + 5):
                # a node appended by another process first, so every read recomputes the shape
                node = ContextNode(tree_id=tree, parent_id=rng.choice(parents), author=AUTHOR, text="new")
                await store.publish(node)
                started = time.perf_counter()
                structure(await store.tree(tree), limit=10_000)
                if i >= 5:
                    samples.append((time.perf_counter() - started) * 1000)
            results.append(
                summarize(
                    f"context structure @ {size} nodes",
                    samples,
                    baseline="context raw: direct get of a tree's newest node",
                    target="p95 <= 50 ms at 10,000" if size == SIZES[-1] else None,
                    extra={"nodes": size, "changed_before_each_read": True},
                )
            )
            biggest = tree

        updated: list[float] = []
        state = await store.tree(biggest)
        before_updates = state.max_seq
        for i in range(ctx.iterations(50, 5) + 2):
            # an update (a node superseding another): its row in the kept shape is replaced
            target = state.latest(rng.choice(state.order))
            update = ContextNode(
                tree_id=biggest, parent_id=target.parent_id, supersedes=target.id, author=AUTHOR, text="v2"
            )
            if target.parent_id is None:
                continue
            await store.publish(update)
            started = time.perf_counter()
            state = await store.tree(biggest)
            structure(state, limit=10_000)
            if i >= 2:
                updated.append((time.perf_counter() - started) * 1000)
        results.append(
            summarize(
                "context structure, after an update @10,000 nodes",
                updated,
                baseline="context raw: direct get of a tree's newest node",
            )
        )

        # time travel on the big tree: as it stood before the updates above, with a node
        # appended before each read (as "structure @ 10,000 nodes": every read recomputes)
        then: list[float] = []
        for i in range(ctx.iterations(200, 10) + 5):
            node = ContextNode(tree_id=biggest, parent_id=rng.choice(parents), author=AUTHOR, text="new")
            await store.publish(node)
            started = time.perf_counter()
            structure(await store.tree(biggest), limit=10_000, upto=before_updates)
            if i >= 5:
                then.append((time.perf_counter() - started) * 1000)
        results.append(
            summarize(
                "context structure as of before the updates @10,000 nodes",
                then,
                baseline="context structure @ 10000 nodes",
                target="within 2x of the structure now",
                extra={"nodes": SIZES[-1], "changed_before_each_read": True},
            )
        )

        async def first_then(tree: str = biggest) -> None:
            state = await store.tree(tree)
            state.shapes.clear()  # the first read of this past point builds its shape
            structure(state, limit=10_000, upto=before_updates)

        results.append(
            summarize(
                "context structure as of a past point, first read @10,000 nodes",
                await time_async(first_then, ctx.iterations(50, 5)),
                baseline="context structure @ 10000 nodes",
            )
        )

        async def leaves_now(tree: str = biggest) -> None:
            leaves(await store.tree(tree), limit=10_000)

        results.append(
            summarize(
                "context leaves, unchanged tree @10,000 nodes",
                await time_async(leaves_now, ctx.iterations(200, 10)),
                baseline="context structure, unchanged tree (kept shape) @10,000 nodes",
            )
        )

        async def unchanged(tree: str = biggest) -> None:
            structure(await store.tree(tree), limit=10_000)

        results.append(
            summarize(
                "context structure, unchanged tree (kept shape) @10,000 nodes",
                await time_async(unchanged, ctx.iterations(200, 10)),
                baseline="context raw: direct get of a tree's newest node",
            )
        )

        async def cold_structure() -> None:
            fresh = ContextStore(nc, names)
            fresh._ensured = True
            structure(await fresh.tree(biggest), limit=10_000)

        results.append(
            summarize(
                "context structure, cold copy @10,000 nodes",
                await time_async(cold_structure, ctx.iterations(10, 2), warmup=1),
                baseline="context raw: read every node @10,000",
            )
        )

        async def raw_big() -> None:
            await _raw_read_all(js, names.context_stream, names.context_subject(biggest), SIZES[-1])

        results.append(
            summarize(
                "context raw: read every node @10,000",
                await time_async(raw_big, ctx.iterations(10, 2), warmup=1),
            )
        )

        # -- the budgeted context build ---------------------------------------------------
        parent = secrets.token_hex(16)
        from shared.identity import subagent_id

        me = subagent_id(parent, "coder")
        identity = _identity(names.project_id, ctx.scratch, me, parent)
        tokens.counter()  # loaded once per process, before timing
        service = MemoryService(nc, identity, PatternConfig(export_dir=ctx.scratch / "exports"))
        await service.start()
        await _memories(js, service.buckets.project, me, parent, names.project_id, rng)
        deadline = time.monotonic() + 120
        while len(service.index) < MEMORIES:
            if time.monotonic() > deadline:
                raise RuntimeError(f"index saw {len(service.index)} of {MEMORIES} memories")
            await asyncio.sleep(0.05)
        work = await _bushy(store, WORK_NODES, rng)
        request = BuildContextInput(budget_tokens=BUDGET, work_id=work)
        started = time.perf_counter()
        first = await service.build_context(request)
        first_ms = (time.perf_counter() - started) * 1000
        results.append(
            summarize(
                f"context build, {BUDGET} tokens, 10,000 memories + 1,000-node work tree",
                await time_async(lambda: service.build_context(request), ctx.iterations(300, 10)),
                baseline="context raw: direct get of a tree's newest node",
                target="p95 <= 30 ms",
                extra={
                    "items": len(first.items),
                    "used_tokens": first.used_tokens,
                    "omitted": first.omitted_total,
                    "counter": first.counter,
                },
            )
        )
        results.append(
            BenchResult(name="context build, first (token counts not cached)", value=round(first_ms, 2))
        )
        some = [e for e in list(service.index.walk(tuple(Scope), tuple(Category)))[:200]]

        async def build_after_a_read() -> None:
            # a read before each build: the tiers of every layer are scored again
            service.accesses.touch([rng.choice(some)], utcnow())
            await service.build_context(request)

        results.append(
            summarize(
                f"context build, tiers scored again, {BUDGET} tokens, 10,000 memories",
                await time_async(build_after_a_read, ctx.iterations(100, 5)),
                baseline="context raw: direct get of a tree's newest node",
                target="p95 <= 30 ms",
            )
        )
        pack_request = PackInput(
            summary=_text(rng, 300),
            open_work=[_text(rng, 12) for _ in range(10)],
            decisions=[_text(rng, 12) for _ in range(10)],
            files=[f"src/module_{n}.py" for n in range(30)],
            work_id=work,
            budget_tokens=BUDGET,
        )

        async def pack_state() -> None:
            await service.pack(pack_request)

        results.append(
            summarize(
                f"compaction pack, {BUDGET} tokens, 10,000 memories + 1,000-node work tree",
                await time_async(pack_state, ctx.iterations(100, 5)),
                baseline="context raw: direct get of a tree's newest node",
                target="p95 <= 50 ms",
                extra={"stores": "one memory version (a KV publish) + the hot-tier build"},
            )
        )

        async def restore_state() -> None:
            await service.restore(RestoreInput(work_id=work, budget_tokens=BUDGET))

        results.append(
            summarize(
                f"compaction restore, {BUDGET} tokens, 10,000 memories",
                await time_async(restore_state, ctx.iterations(100, 5)),
                baseline="context raw: direct get of a tree's newest node",
            )
        )
        await service.close()
    finally:
        await nc.close()
    return results
