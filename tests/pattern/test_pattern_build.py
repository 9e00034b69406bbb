"""The budgeted context build (pattern_build_context), inheritance along the parent chain, and
the offline tokenizer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from pattern_helpers import make_identity, sub_identity
from pydantic import ValidationError

from pattern.build import DEFAULT_SHARES, OVER_BUDGET, Candidate, build, line
from pattern.errors import AccessDeniedError, NotFoundError
from pattern.inputs import (
    BuildContextInput,
    CoreMemoryInput,
    ForgetInput,
    RecallInput,
    RememberInput,
    ShareLearningInput,
)
from pattern.models import Category, Scope
from shared.agents.lineage import LineageRecord, ancestors, checked
from shared.context import tokens
from shared.models import WorkSubmission
from shared.names import ProjectNames
from shared.work.rules import Claimant
from testsupport.work import work_queue


def test_the_counter_is_a_real_tokenizer_and_is_named() -> None:
    counter = tokens.counter()
    assert counter.name.startswith("tiktoken ") and "cl100k_base" in counter.name
    assert counter.count("hello world") == 2  # cl100k: "hello", " world"
    assert counter.count("antidisestablishmentarianism") > 1
    assert counter.count("") == 0


def test_the_counter_loads_without_network() -> None:
    """In a fresh process with no network at all (its own network namespace when possible)
    and the hubs told to stay offline, the vocabulary still loads and counts."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TIKTOKEN_CACHE_DIR": str(Path("/nonexistent-cache"))}
    code = "from shared.context import tokens; c = tokens.counter(); print(c.count('hello world'))"
    command = [sys.executable, "-c", code]
    isolated = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    if isolated:
        command = ["unshare", "-n", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


def test_a_tampered_vocabulary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "VOCABULARY_SHA256", "0" * 64)
    with pytest.raises(tokens.TokenizerUnavailable, match="not the published one"):
        tokens.load()


def test_a_built_text_counts_as_the_sum_of_its_lines() -> None:
    """Lines fold whitespace and end in a newline, so no token spans two of them: the build
    counts each item once (cached) and the whole text's count is their sum."""
    import random

    counter = tokens.counter()
    rng = random.Random(3)
    alphabet = list("abc xyz 123 \t\n  ÄÖü 漢字 😀 ,.;:!?-_()[]{}'\"\\/ ")
    for _ in range(500):
        lines = [
            line(
                rng.choice(["own", "work"]),
                "note",
                "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))),
            )
            for _ in range(rng.randint(1, 8))
        ]
        assert counter.count("".join(lines)) == sum(counter.count(x) for x in lines)


def candidates(layer: str, texts: list[str], counter: tokens.TokenCounter) -> list[Candidate]:
    return [
        Candidate(layer, f"{layer}-{i}", "note", t, counter.count(line(layer, "note", t)))
        for i, t in enumerate(texts)
    ]


def test_policy_allots_shares_passes_unused_on_and_removes_duplicates() -> None:
    counter = tokens.counter()
    core = candidates("core", ["I am the parser agent"], counter)
    own = candidates("own", [f"own note {i} " + "word " * 30 for i in range(40)], counter)
    team = candidates("team", ["I am the parser agent", "team decision: use PEG"], counter)
    built = build(
        400,
        dict(DEFAULT_SHARES),
        {"core": (iter(core), 1), "own": (iter(own), 40), "team": (iter(team), 2)},
        counter,
    )
    assert counter.count(built.text) == built.used <= 400
    layers = {u.name: u for u in built.layers}
    assert layers["work"].share == 0 and layers["inherited"].share == 0  # nothing there: shares move on
    assert built.items[0].id == "core-0"
    assert [i.layer for i in built.items] == sorted(
        (i.layer for i in built.items), key=["core", "own", "team"].index
    )
    assert {"team-1"} <= {i.id for i in built.items}
    dup = [o for o in built.omitted if o.id == "team-0"]
    assert dup and dup[0].reason == "duplicate of core-0"
    assert any(o.reason == OVER_BUDGET for o in built.omitted if o.layer == "own")
    assert built.omitted_total == layers["own"].omitted + layers["team"].omitted
    assert layers["own"].items + layers["own"].omitted == 40


async def test_build_layers_work_context_and_inheritance(
    make_service, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    grand = make_identity(project_id, project_path, handle="lead")
    lead = await make_service(grand)
    await lead.remember(
        RememberInput(content="lead's private plan: split the lexer first", category=Category.LONGTERM)
    )
    await lead.core_memory(CoreMemoryInput(content="lead core: sub-agents never see this"))
    parent_identity = sub_identity(grand, "planner")
    parent = await make_service(parent_identity)
    await parent.remember(RememberInput(content="planner's private note: tokens before grammar"))
    child_identity = sub_identity(parent_identity, "coder")
    child = await make_service(child_identity)
    assert child.viewer.ancestors == (parent_identity.agent_id, grand.agent_id)
    stranger = await make_service(make_identity(project_id, project_path, handle="stranger"))
    await stranger.remember(RememberInput(content="stranger's private secret plan"))
    shared = (
        await stranger.remember(RememberInput(content="team learning: fuzz the lexer", scope=Scope.TEAM))
    ).memory
    await stranger.share_learning(ShareLearningInput(memory_id=shared.id))
    await child.remember(RememberInput(content="my own note: lexer tests live in tests/lex"))
    queue = work_queue(nc, ProjectNames(project_id))
    item = await queue.submit(
        WorkSubmission(task_id="lex", description="rewrite the lexer", capability="code")
    )
    claimed = await queue.claim(Claimant(agent_id=child.agent_id, agent_type="coder", capabilities=("code",)))
    assert claimed is not None
    await queue.settle()
    await queue.fail(item.id, child.agent_id, "first try broke unicode")

    got = await child.build_context(BuildContextInput(budget_tokens=2000, work_id=item.id))
    texts = {i.text for i in got.items}
    layer_of = {i.text: i.layer for i in got.items}
    assert "lead's private plan: split the lexer first" in texts  # grandparent, inherited
    assert "planner's private note: tokens before grammar" in texts
    assert layer_of["planner's private note: tokens before grammar"] == "inherited"
    assert "stranger's private secret plan" not in texts  # another agent's private memory
    assert "lead core: sub-agents never see this" not in texts  # nor its parent chain's core ones
    assert layer_of["first try broke unicode"] == "work" and "rewrite the lexer" in texts
    assert layer_of["my own note: lexer tests live in tests/lex"] == "own"
    assert "team learning: fuzz the lexer" in texts
    assert got.counter == tokens.counter().name
    assert got.used_tokens == tokens.counter().count(got.context) <= 2000
    assert [i.layer for i in got.items] == sorted(
        (i.layer for i in got.items), key=["core", "work", "own", "inherited", "team"].index
    )
    # read-only: the child never changes what it inherits
    inherited = [i for i in got.items if i.layer == "inherited"]
    with pytest.raises(AccessDeniedError):
        await child.forget(ForgetInput(memory_id=inherited[0].id))
    # a tight budget leaves things out, and says why
    small = await child.build_context(BuildContextInput(budget_tokens=64, work_id=item.id))
    assert small.used_tokens <= 64 and small.omitted_total > 0 and small.omitted
    # refusals name the field
    with pytest.raises(NotFoundError) as missing:
        await child.build_context(BuildContextInput(work_id="f" * 32))
    assert missing.value.field == "work_id"
    with pytest.raises(ValidationError, match="add up to 1"):
        BuildContextInput(shares={"core": 0.5, "own": 0.2})
    with pytest.raises(ValidationError):
        BuildContextInput(budget_tokens=10)


async def test_a_forged_lineage_record_grants_nothing(
    make_service, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    victim = await make_service(make_identity(project_id, project_path, handle="victim"))
    await victim.remember(RememberInput(content="victim's private note"))
    parent = make_identity(project_id, project_path, handle="parent")
    child_identity = sub_identity(parent, "coder")
    names = ProjectNames(project_id)
    js = nc.jetstream()
    from shared.nats.jetstream import ensure_kv

    kv = await ensure_kv(js, names.lineage_bucket)
    forged = LineageRecord(agent_id=parent.agent_id, parent_id=victim.agent_id, subagent_type="coder")
    assert not checked(forged)
    await kv.put(parent.agent_id, forged.to_json_bytes())
    assert await ancestors(js, names, child_identity) == (parent.agent_id,)
    child = await make_service(child_identity)
    recalled = await child.recall_context(RecallInput())
    assert "victim's private note" not in {m.content for m in recalled.memories}


async def test_the_parent_chain_is_followed_to_any_depth(
    make_service, nc: NatsClient, project_id: str, project_path: Path
) -> None:
    """Sub-agents of sub-agents, 40 deep (past any fixed small limit): the deepest one's chain
    names every ancestor, nearest first, up to the top-level agent."""
    from shared.agents.lineage import record_lineage

    names = ProjectNames(project_id)
    js = nc.jetstream()
    top = make_identity(project_id, project_path, handle="lead")
    chain = [top]
    for level in range(40):
        chain.append(sub_identity(chain[-1], f"level-{level}"))
        await record_lineage(js, names, chain[-1])
    assert await ancestors(js, names, chain[-1]) == tuple(i.agent_id for i in reversed(chain[:-1]))
