"""One submission rule: Warp's tool and Shuttle's checks hold every field to WorkSubmission.

The limits have one home (``shared/limits.py``). These tests take the rules from the
model itself (its JSON schema) and compare, field by field: the input schema Warp publishes
for ``warp_work_broadcast`` (read over a real MCP session), the values Shuttle's client-side
checks let through (``shuttle.validate.submission``), and the ranges and defaults of
``shuttle submit``'s options. A limit changed in one place and not in the others fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from mcp import Client
from pydantic import ValidationError

from shared.identity import Identity
from shared.models import WorkSubmission
from shared.nats.server import EmbeddedNatsServer
from shared.usage.rules import MAX_COST, MAX_TOKENS
from shuttle import validate
from shuttle.errors import UsageError
from testsupport.servers import resolve_schema

RULE_KEYS = frozenset(
    {
        "type",
        "enum",
        "const",
        "format",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "uniqueItems",
        "required",
        "additionalProperties",
    }
)

WARP_FILLS_IN = frozenset({"task_id", "context", "depends_on"})
"""Arguments Warp publishes as optional (null by default) and fills in itself before it
builds the model: a generated task id, an empty context, no dependencies."""

MODEL = WorkSubmission.model_json_schema()


def rules(root: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What a schema enforces, without titles and descriptions; nested objects and list
    items included (with their defaults, which are part of the rule there)."""
    resolved = resolve_schema(root, schema)
    out = {k: v for k, v in resolved.items() if k in RULE_KEYS}
    if "items" in resolved:
        out["items"] = rules(root, resolved["items"])
    if "properties" in resolved:
        out["properties"] = {
            name: {**rules(root, prop), "default": prop.get("default")}
            for name, prop in resolved["properties"].items()
        }
    return out


def model_rules(field: str) -> dict[str, Any]:
    return rules(MODEL, MODEL["properties"][field])


# -- Warp -----------------------------------------------------------------------------------


async def broadcast_schema(url: str, project_dir: Path) -> dict[str, Any]:
    """The input schema Warp publishes for warp_work_broadcast, over a real MCP session."""
    from warp.runtime import WarpRuntime
    from warp.server import build_server
    from warp.settings import WarpSettings

    identity = Identity(
        project_id="parity",
        project_path=project_dir,
        agent_id="a" * 32,
        base_agent_id="a" * 32,
        hostname="host",
        handle="parity",
        agent_type="generic",
        user_id="b" * 16,
    )
    runtime = WarpRuntime(identity, WarpSettings(), nats_url=url)
    async with Client(build_server(runtime)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    return dict(listed["warp_work_broadcast"].input_schema)


async def test_warp_publishes_the_models_rules_for_every_field(
    nats_server: EmbeddedNatsServer, tmp_path: Path
) -> None:
    tool = await broadcast_schema(nats_server.url, tmp_path)
    assert set(tool["properties"]) == set(MODEL["properties"])
    for field, prop in MODEL["properties"].items():
        published = tool["properties"][field]
        assert rules(tool, published) == model_rules(field), field
        if field in WARP_FILLS_IN:
            assert published.get("default") is None, field
        else:
            assert published.get("default") == prop.get("default"), field
    assert set(tool["required"]) == set(MODEL["required"]) - {"task_id"}
    assert tool.get("additionalProperties") is False


# -- Shuttle --------------------------------------------------------------------------------

BASE: dict[str, Any] = {"task_id": "t-1", "description": "do it", "capability": "code"}
TOKENS = ("a", "a" * 63, "a" * 64, "a" * 65, "a_b-c9", "9a", "Code", "-a", "_a", "a.b", "a*", "a b", "")
WORK_ID = "0123456789abcdef" * 2


def _lengths(field: str) -> list[str]:
    r = model_rules(field)
    return ["x" * n for n in (r["minLength"] - 1, r["minLength"], r["maxLength"], r["maxLength"] + 1)]


def _range(r: dict[str, Any]) -> list[int]:
    return [r["minimum"] - 1, r["minimum"], r["maximum"], r["maximum"] + 1]


def _ids(n: int) -> list[str]:
    return [f"{i:032x}" for i in range(1, n + 1)]


def probes() -> list[tuple[str, dict[str, Any]]]:
    """(field, submission) pairs at and just past each of the model's limits."""
    out: list[tuple[str, dict[str, Any]]] = []
    for field in ("task_id", "description"):
        out += [(field, {field: v}) for v in _lengths(field)]
    token_fields = [f for f in MODEL["properties"] if model_rules(f).get("pattern") and f != "depends_on"]
    assert set(token_fields) == {"capability", "boundary", "required_agent_type", "preferred_agent_type"}
    out += [(field, {field: v}) for field in token_fields for v in TOKENS]
    for field in ("priority", "max_attempts"):
        out += [(field, {field: v}) for v in _range(model_rules(field))]
    out += [("scope", {"scope": v}) for v in [*model_rules("scope")["enum"], "everyone"]]
    most = model_rules("depends_on")["maxItems"]
    out += [
        ("depends_on", {"depends_on": v})
        for v in ([], _ids(most), _ids(most + 1), [WORK_ID, WORK_ID], ["not-an-id"], [WORK_ID.upper()])
    ]
    review = model_rules("review")["properties"]
    attempts = model_rules("max_attempts")["maximum"]  # rounds may not exceed max_attempts
    out += [
        ("review", {"review": {"capability": "review", "rounds": v}, "max_attempts": attempts})
        for v in _range(review["rounds"])
    ]
    out += [("review", {"review": {"capability": v}}) for v in ("review", "Review", "")]
    out += [("review", {"review": {"capability": "review", "extra": 1}})]
    for cost in (-1, 0, 0.01, MAX_COST):
        out.append(("budget", {"budget": {"cost": cost}}))
    for tokens in (-1, 0, 1, MAX_TOKENS):
        out.append(("budget", {"budget": {"tokens": tokens}}))
    out += [("budget", {"budget": {"cost": 1, "dollars": 1}})]
    out += [("deadline", {"deadline": v}) for v in ("2030-01-01T12:00:00Z", "2030-01-01T12:00:00")]
    out += [("context", {"context": v}) for v in ({}, {"repo": "acme/app"}, [1])]
    return out


DELIBERATE: dict[str, tuple[dict[str, Any], bool, bool]] = {
    "Shuttle also refuses a description of spaces only": ({"description": "   "}, True, False),
    "the ranges of a budget's upper ends are Weft's to check (shuttle.validate.budget)": (
        {"budget": {"cost": MAX_COST * 2}},
        False,
        True,
    ),
    "the same holds for a budget's tokens": ({"budget": {"tokens": MAX_TOKENS + 1}}, False, True),
    "rounds against max_attempts (two fields) is Weft's to check": (
        {"review": {"capability": "review", "rounds": 4}, "max_attempts": 3},
        False,
        True,
    ),
}
"""Where Shuttle's checks and the model knowingly differ: (submission, model accepts,
Shuttle accepts). Anything Shuttle lets through here is refused by Weft with the field named."""


def model_accepts(submission: dict[str, Any]) -> bool:
    try:
        WorkSubmission.model_validate(submission)
    except ValidationError:
        return False
    return True


def shuttle_checks(submission: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """What Shuttle would send (None: refused before sending) and its message."""
    try:
        return validate.submission(submission), ""
    except UsageError as exc:
        return None, str(exc)


@pytest.mark.parametrize(("field", "change"), probes(), ids=lambda p: str(p)[:40])
def test_shuttle_accepts_exactly_what_the_model_accepts(field: str, change: dict[str, Any]) -> None:
    submission = {**BASE, **change}
    accepted = model_accepts(submission)
    sent, message = shuttle_checks(submission)
    assert (sent is not None) == accepted, (field, message)
    if sent is None:
        assert field in message
    else:
        assert model_accepts(sent)


@pytest.mark.parametrize("why", list(DELIBERATE))
def test_the_deliberate_differences_are_only_these(why: str) -> None:
    change, model_ok, shuttle_ok = DELIBERATE[why]
    submission = {**BASE, **change}
    assert model_accepts(submission) is model_ok
    assert (shuttle_checks(submission)[0] is not None) is shuttle_ok


def test_shuttle_submit_options_take_the_models_ranges_and_defaults() -> None:
    from shuttle.cli import app

    command = typer.main.get_command(app)
    options = {p.name: p for p in command.commands["submit"].params}  # type: ignore[attr-defined]
    for field in ("priority", "max_attempts"):
        r = model_rules(field)
        option = options[field]
        assert (option.min, option.max) == (r["minimum"], r["maximum"]), field
        assert option.default == MODEL["properties"][field]["default"], field
    rounds = model_rules("review")["properties"]["rounds"]
    assert (options["review_rounds"].min, options["review_rounds"].max) == (
        rounds["minimum"],
        rounds["maximum"],
    )
    for field in ("boundary", "scope"):
        assert options[field].default == MODEL["properties"][field]["default"], field
