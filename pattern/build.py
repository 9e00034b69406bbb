"""The budgeted context build (docs/context.md, Budget policy): what an agent should load
for a task, within a number of tokens.

Sources are **layers**, in priority order:

1. ``core`` — the agent's own core memories (most important first);
2. ``work`` — the work item's context tree, newest first (its attempts, notes, failures);
3. ``own`` — the agent's other memories, in recall order (longterm, shared, recent, tasks);
4. ``inherited`` — private memories of its parent chain (sub-agents only, read-only);
5. ``team`` — the project's decisions, architecture notes and learnings by other agents.

**Policy.** Each layer is allotted its share of the budget (default 15/35/20/15/15 %;
a layer with nothing to offer passes its share on). A layer takes its items in order while
they fit its allowance; an item that does not fit is skipped (and the next ones tried, up
to a few) — what the layer leaves unused is carried to the next layer. A second round
then offers whatever is left of the budget to every layer again, in priority order, so no
budget stays unused while something that fits was left out. Duplicates (the same text,
or a shared copy of a memory already taken) are taken once, by the first layer that
reaches them. The result lists what was taken, in layer order, and what was left out and
why; it never exceeds the budget as counted by the named tokenizer. Each item is counted as
the line it becomes (:func:`line`: whitespace folded, one line each, so lines never share a
token and the text's count is the sum of its lines' — a test checks this on random text).

Items are walked lazily and their token counts cached, so a build costs what it takes,
not the size of the store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from shared.context.tokens import TokenCounter

if TYPE_CHECKING:
    from pattern.results import ChatContext

LAYERS: Final = ("core", "work", "own", "inherited", "team")
DEFAULT_SHARES: Final = {"core": 0.15, "work": 0.35, "own": 0.20, "inherited": 0.15, "team": 0.15}
MISSES: Final = 16
"""Items too large for the allowance a layer skips before it stops looking (first round)."""
OMITTED_SHOWN: Final = 50
"""Left-out items listed one by one (the counts cover all of them)."""

OVER_BUDGET = "larger than what was left of the budget"
NOT_REACHED = "not reached: the budget was used up before it"


@dataclass
class Candidate:
    """One thing a layer offers."""

    layer: str
    id: str
    kind: str
    text: str
    tokens: int
    """Tokens of its rendered line (see :func:`line`)."""
    source_id: str | None = None
    """For a shared copy: the memory it was copied from (a duplicate of it)."""
    tier: str | None = None
    """hot, warm or cold for a memory (pattern/importance.py); None for a work node."""


def line(layer: str, kind: str, text: str) -> str:
    """How an item reads in the built context: one line, its layer and kind first."""
    return f"- [{layer}/{kind}] {' '.join(text.split())}\n"


def fingerprint(text: str) -> str:
    return hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).hexdigest()[:32]


@dataclass
class LayerReport:
    name: str
    share: float
    allotted: int
    used: int = 0
    items: int = 0
    considered: int = 0
    omitted: int = 0
    available: int = 0
    """How many items the layer holds (what a build could have looked at)."""


@dataclass
class Omitted:
    layer: str
    id: str
    reason: str
    tier: str | None = None


@dataclass
class Built:
    budget: int
    used: int
    counter: str
    items: list[Candidate]
    layers: list[LayerReport]
    omitted: list[Omitted]
    omitted_total: int
    text: str
    omitted_by_tier: dict[str, int] = field(default_factory=dict)
    """Memories the build looked at and left out, per tier (the unreached ones are lower
    in their layer's order: the same tier as the last one looked at, or a lower one)."""


@dataclass
class _Layer:
    report: LayerReport
    items: Iterator[Candidate]
    skipped: list[Candidate] = field(default_factory=list)
    done: bool = False


def build(
    budget: int,
    shares: dict[str, float],
    sources: dict[str, tuple[Iterator[Candidate], int]],
    counter: TokenCounter,
) -> Built:
    """Fill ``budget`` tokens from ``sources`` (layer -> (candidates in order, how many
    there are)) by the policy in the module doc."""
    offered = {name: shares.get(name, 0.0) for name in LAYERS if sources.get(name, (None, 0))[1] > 0}
    total_share = sum(offered.values()) or 1.0
    layers: list[_Layer] = []
    for name in LAYERS:
        items, available = sources.get(name, (iter(()), 0))
        share = offered.get(name, 0.0) / total_share
        report = LayerReport(
            name=name, share=round(share, 4), allotted=int(budget * share), available=available
        )
        layers.append(_Layer(report, items, done=available == 0))
    taken: list[Candidate] = []
    omitted: list[Omitted] = []
    seen: dict[str, str] = {}
    used = 0

    def duplicate(candidate: Candidate) -> str | None:
        for key in (
            f"id:{candidate.source_id}" if candidate.source_id else None,
            fingerprint(candidate.text),
        ):
            if key is not None and key in seen:
                return seen[key]
        return None

    def take(layer: _Layer, candidate: Candidate) -> None:
        nonlocal used
        taken.append(candidate)
        layer.report.used += candidate.tokens
        layer.report.items += 1
        used += candidate.tokens
        seen[fingerprint(candidate.text)] = candidate.id
        seen[f"id:{candidate.id}"] = candidate.id

    def pull(layer: _Layer) -> Candidate | None:
        for candidate in layer.items:
            layer.report.considered += 1
            original = duplicate(candidate)
            if original is not None:
                omitted.append(
                    Omitted(layer.report.name, candidate.id, f"duplicate of {original}", candidate.tier)
                )
                continue
            return candidate
        layer.done = True
        return None

    carry = 0
    for layer in layers:  # first round: each layer within its allowance plus what came before unused
        allowance = layer.report.allotted + carry
        spent = 0
        misses = 0
        while not layer.done and misses < MISSES:
            candidate = pull(layer)
            if candidate is None:
                break
            if spent + candidate.tokens <= allowance and used + candidate.tokens <= budget:
                take(layer, candidate)
                spent += candidate.tokens
            else:
                layer.skipped.append(candidate)
                misses += 1
        carry = max(0, allowance - spent)
    for layer in layers:  # second round: whatever is left of the budget, in priority order
        retry, layer.skipped = layer.skipped, []
        for candidate in retry:
            if duplicate(candidate) is None and used + candidate.tokens <= budget:
                take(layer, candidate)
            else:
                layer.skipped.append(candidate)
        while not layer.done and budget - used > 0:
            candidate = pull(layer)
            if candidate is None:
                break
            if used + candidate.tokens <= budget:
                take(layer, candidate)
            else:
                layer.skipped.append(candidate)
                if len(layer.skipped) >= MISSES:
                    break
    for layer in layers:
        for candidate in layer.skipped:  # the second round offered them everything that was left
            omitted.append(Omitted(layer.report.name, candidate.id, OVER_BUDGET, candidate.tier))
        unreached = max(0, layer.report.available - layer.report.considered)
        layer.report.omitted = layer.report.considered - layer.report.items + unreached
    by_tier: dict[str, int] = {}
    for left in omitted:
        if left.tier is not None:
            by_tier[left.tier] = by_tier.get(left.tier, 0) + 1
    taken.sort(key=lambda c: LAYERS.index(c.layer))  # stable: each layer keeps its own order
    reports = {layer.report.name: layer.report for layer in layers}
    total_omitted = sum(report.omitted for report in reports.values())
    return Built(
        budget=budget,
        used=used,
        counter=counter.name,
        items=taken,
        layers=[layer.report for layer in layers],
        omitted=omitted[:OMITTED_SHOWN],
        omitted_total=total_omitted,
        text="".join(line(c.layer, c.kind, c.text) for c in taken),
        omitted_by_tier=by_tier,
    )


def chat_shape(items: list[Candidate]) -> ChatContext:
    """The built items as a chat host takes them: the memories (core, own, inherited,
    team) as the system prompt, the work tree (newest first, as built) as one user message."""
    from pattern.results import ChatContext, ChatMessage

    headings = {
        "core": "Who you are and the rules you follow",
        "own": "What you remember",
        "inherited": "What your parent agents know",
        "team": "What the team decided and learned",
    }
    parts: list[str] = []
    for layer, heading in headings.items():
        lines = [line(layer, c.kind, c.text) for c in items if c.layer == layer]
        if lines:
            parts.append(f"## {heading}\n{''.join(lines)}")
    work = [line("work", c.kind, c.text) for c in items if c.layer == "work"]
    messages = (
        [ChatMessage(role="user", content="The work so far, newest first:\n" + "".join(work))] if work else []
    )
    return ChatContext(system="\n".join(parts), messages=messages)
