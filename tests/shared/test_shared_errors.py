"""shared.errors: one base for every anticipated error, and messages that never
repeat the rejected value."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Annotated, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared import errors as e
from shared.names import validate_capability

SECRET = "ghp_Z9xK2mQ7vR4tY8wE1uI3oP5aS6dF0gH"

# Exceptions that are not Loom errors on purpose (or not yet), with the reason.
NOT_LOOM_ERRORS = {
    "weft.spinup.demo_agent.WarpGone": "control flow inside the demo agent",
    "weft.spinup.demo_agent.Stopping": "control flow inside the demo agent (a WarpGone: asked to stop)",
    "weft.demo.DemoFailed": "the throw-away demo's own failure, printed by `weft demo`; crosses no API",
}


def _exception_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for package in ("shared", "weft", "warp", "pattern", "shuttle"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name:
                    found.append(cls)
    return found


def test_every_domain_error_derives_from_loom_error() -> None:
    classes = _exception_classes()
    names = {f"{c.__module__}.{c.__qualname__}" for c in classes}
    assert len(classes) > 40
    assert set(NOT_LOOM_ERRORS) <= names  # the list stays true: nothing in it has gone
    strays = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if not issubclass(c, e.LoomError) and f"{c.__module__}.{c.__qualname__}" not in NOT_LOOM_ERRORS
    )
    assert strays == []
    settled = sorted(
        n
        for n in NOT_LOOM_ERRORS
        if any(f"{c.__module__}.{c.__qualname__}" == n and issubclass(c, e.LoomError) for c in classes)
    )
    assert settled == []  # once unified, take it off the list


def test_the_kinds_and_their_codes() -> None:
    assert [k.code for k in (e.Invalid, e.NotFound, e.Conflict, e.Forbidden, e.Unavailable)] == [
        "invalid",
        "not_found",
        "conflict",
        "forbidden",
        "unavailable",
    ]
    assert e.LoomError("x").code == "invalid"
    assert e.LoomError("x", code="spinup_unavailable").code == "spinup_unavailable"
    assert e.NotFound("x").code == "not_found" and e.Conflict("x", code="taken").code == "taken"


def test_domain_errors_are_also_their_kind() -> None:
    from pattern.errors import AccessDeniedError, NotFoundError, UnavailableError
    from shared.agents.registry import AgentNotFound
    from shared.names import InvalidNameError
    from shared.work.rules import NotClaimant, WorkConflict, WorkNotFound
    from shuttle.errors import Unreachable, UsageError

    assert isinstance(WorkNotFound("0" * 32), e.NotFound) and WorkNotFound("0" * 32).code == "not_found"
    assert isinstance(WorkConflict("busy"), e.Conflict) and isinstance(NotClaimant("no"), e.Forbidden)
    assert isinstance(AgentNotFound("0" * 32), e.NotFound)
    assert isinstance(NotFoundError("x"), e.NotFound) and isinstance(AccessDeniedError("x"), e.Forbidden)
    assert isinstance(UnavailableError("x"), e.Unavailable)
    assert isinstance(UsageError("x"), e.Invalid) and isinstance(Unreachable("x"), e.Unavailable)
    assert isinstance(InvalidNameError("f", "rule"), ValueError)  # pydantic validators rely on it
    from shared.nats.jsapi import JetStreamReplyError
    from weft.spinup.mechanisms.base import MechanismError

    reply = JetStreamReplyError("404", "No Messages")
    assert reply.code == "jetstream_error" and isinstance(reply, RuntimeError)  # callers catch either
    assert (reply.status, reply.description, reply.message) == ("404", "No Messages", str(reply))
    failed = MechanismError("ssh host:22: cannot connect: token=abc123def")
    assert isinstance(failed, e.Unavailable) and failed.code == "unavailable"
    assert "abc123def" not in str(failed) and failed.message == str(failed)


def test_message_names_the_field_once() -> None:
    err = e.Invalid("must be positive", field="limit", rule="1-1000")
    assert (err.message, str(err), err.field, err.rule) == ("limit: must be positive",) * 2 + (
        "limit",
        "1-1000",
    )
    assert e.Invalid("limit: must be positive", field="limit").message == "limit: must be positive"
    assert e.Invalid("no field here").message == "no field here"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("capability", "capability"),
        ("x-loom-project", "x-loom-project"),
        ("NATS_URL", "NATS_URL"),
        ("colour", "colour"),
        (SECRET, "*"),
        ("abc123", "*"),
        ("3f9a0c", "*"),
        ("MixedCase", "*"),
        ("a" * 41, "*"),
        ("has space", "*"),
        (7, "*"),
    ],
)
def test_shown_name(name: object, shown: str) -> None:
    assert e.shown_name(name) == shown


def test_field_path_hides_keys_a_caller_chose() -> None:
    assert e.field_path(("capabilities", 2)) == "capabilities.2"
    assert e.field_path(("metadata", SECRET, "[key]")) == "metadata.*.[key]"
    assert e.field_path(("context", "repo")) == "context.repo"


def test_without_value() -> None:
    assert e.without_value(f"Input tag '{SECRET}' found", SECRET) == "Input tag the given value found"
    assert e.without_value("must be 1-10", "abc") == "must be 1-10"


class _Meta(BaseModel):
    model_config = ConfigDict(extra="forbid")
    capability: str
    metadata: dict[Annotated[str, Field(pattern=r"^[a-z]+$")], Annotated[str, Field(max_length=3)]] = {}
    kind: Literal["a", "b"] = "a"

    @field_validator("capability")
    @classmethod
    def _cap(cls, value: str) -> str:
        return validate_capability(value)


def _problems(data: dict[str, object]) -> list[e.Problem]:
    with pytest.raises(ValidationError) as info:
        _Meta.model_validate(data)
    return e.validation_problems(info.value.errors())


def test_validation_problems_name_field_and_rule_without_the_value() -> None:
    problems = _problems(
        {
            "capability": SECRET,
            "metadata": {SECRET: "x", "ok": SECRET},
            "kind": SECRET,
            SECRET: 1,
            "colour": "red",
        }
    )
    text = e.describe_problems(problems, limit=10)
    assert SECRET not in text and SECRET not in repr(problems)
    fields = {p.field: p for p in problems}
    assert fields["capability"].message.startswith("must be lowercase letters")
    assert "metadata.*.[key]" in fields and "metadata.ok" in fields
    assert fields["kind"].message == "Input should be 'a' or 'b'"
    assert fields["colour"].message == "unknown field" and fields["*"].message == "unknown field"


def test_describe_problems_caps_the_line() -> None:
    problems = [e.Problem(field=f"f{i}", message="bad", type="x") for i in range(7)]
    assert e.describe_problems(problems, limit=2) == "f0: bad; f1: bad; and 5 more"
    assert e.describe_problems([]) == "invalid input"


def test_parse_problem_says_where_without_quoting_the_document() -> None:
    with pytest.raises(yaml.YAMLError) as info:
        yaml.safe_load(f"token: {SECRET}: x\n")
    assert SECRET[4:] in str(info.value)  # yaml's own text reprints (most of) the line
    assert e.parse_problem(info.value) == "mapping values are not allowed here (line 1, column 43)"
    with pytest.raises(ValueError) as json_info:
        __import__("json").loads('{"token": "' + SECRET + '" oops}')
    assert SECRET not in e.parse_problem(json_info.value) and "line 1" in e.parse_problem(json_info.value)


def test_without_given_cuts_the_callers_strings_but_keeps_names() -> None:
    exc = e.Invalid(f"'{SECRET}' is not a setting of this mechanism (host: ok)", field=f"config.{SECRET}")
    scrubbed = e.without_given(exc, {"command": ["python", "-V"], SECRET: 1, "host": "example.org"})
    assert scrubbed is exc and SECRET not in scrubbed.message and SECRET not in str(scrubbed)
    assert scrubbed.field == "config.*" and scrubbed.message.startswith("config.*: ")
    assert "(host: ok)" in scrubbed.message  # a name-shaped string of the input is left alone
    plain = e.without_given(e.Invalid("must be absolute", field="config.cwd"), {"cwd": "relative/dir"})
    assert plain.message == "config.cwd: must be absolute"
