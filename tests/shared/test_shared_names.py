"""Project isolation is a property of shared/names.py: prove it name by name."""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from shared import names
from shared.names import (
    AGENT_ID_RULE,
    GLOBAL_REGISTRY_BUCKET,
    HANDLE_RULE,
    PROJECT_ID_RULE,
    PUBLIC_MEMORY_BUCKET,
    TOKEN_RULE,
    USER_ID_RULE,
    InvalidNameError,
    ProjectNames,
    kv_stream,
    project_of_spinups_stream,
    project_of_subject,
    project_resource,
    user_memory_bucket,
)

AGENT = "0123456789abcdef0123456789abcdef"
OTHER_AGENT = "fedcba9876543210fedcba9876543210"

# Sample arguments, by parameter name, for every name-producing method of ProjectNames.
_SAMPLES: dict[str, list[Any]] = {
    "channel": ["roadmap", "parallel-work"],
    "agent_id": [AGENT, OTHER_AGENT],
    "capability": ["python", "code-review"],
    "boundary": ["default", "prod"],
    "agent_type": [None, "reviewer"],
    "priority": [1, 10],
    "kind": [None, *names.EVENT_KINDS],
    "action": ["created", "completed"],
    "not_for": [None, AGENT],
    "only_for": [None, OTHER_AGENT],
    "tree_id": [AGENT, OTHER_AGENT],
    "work_id": [AGENT, OTHER_AGENT],
}


def _subject_samples(pn: ProjectNames) -> list[Any]:
    return [
        pn.work_subject("python", "default", None, 5),
        pn.work_subject("rust", "prod", "reviewer", 10),
        pn.work_subject("review", "prod", None, 7, AGENT),
    ]


def all_names(pn: ProjectNames) -> dict[str, str]:
    """Every string name a ProjectNames produces, keyed by how it was produced.

    Discovered by introspection so that a method added later is covered too;
    a parameter without a sample fails loudly rather than being skipped.
    """
    out: dict[str, str] = {}
    for attr, member in inspect.getmembers(type(pn)):
        if attr.startswith("_") or attr.startswith("parse_") or attr == "project_id":
            continue
        if isinstance(member, property):
            value = getattr(pn, attr)
            assert isinstance(value, str), attr
            out[attr] = value
            continue
        if not callable(member):
            continue
        method: Callable[..., Any] = getattr(pn, attr)
        params = list(inspect.signature(method).parameters.values())
        choices: list[list[Any]] = []
        for param in params:
            if param.name == "subject":
                choices.append(_subject_samples(pn))
            else:
                assert param.name in _SAMPLES, f"add a sample for {attr}({param.name}) to _SAMPLES"
                choices.append(_SAMPLES[param.name])
        for combo in itertools.product(*choices):
            try:
                value = method(*combo)
            except InvalidNameError:
                continue  # e.g. event_subject needs a kind, not None
            assert isinstance(value, str), attr
            out[f"{attr}{combo!r}"] = value
    assert len(out) > 20, out
    return out


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("alpha", "beta"),
        ("a", "a-b"),  # one id a prefix of the other
        ("proj", "proj-chan"),
        ("x1", "x11"),
        ("global", "public"),
    ],
)
def test_two_projects_never_share_a_name(a: str, b: str) -> None:
    names_a, names_b = all_names(ProjectNames(a)), all_names(ProjectNames(b))
    shared = set(names_a.values()) & set(names_b.values())
    assert not shared, shared
    # and each project's own names are distinct from each other (no two roles share a name)
    for produced in (names_a, names_b):
        by_value: dict[str, list[str]] = {}
        for key, value in produced.items():
            by_value.setdefault(value, []).append(key)
        # the wildcard filter for "all events" is by design the same as events_subjects
        dupes = {v: k for v, k in by_value.items() if len(k) > 1 and not _is_event_filter_alias(k)}
        assert not dupes, dupes


def _is_event_filter_alias(keys: list[str]) -> bool:
    return sorted(k.split("(")[0] for k in keys) == ["event_filter", "events_subjects"]


@pytest.mark.parametrize("project", ["global", "public", "user-0123456789abcdef", "_global", "agents"])
def test_global_names_never_equal_a_project_name(project: str) -> None:
    """A project called 'global' must not own the cross-project registry bucket, etc."""
    try:
        produced = set(all_names(ProjectNames(project)).values())
    except InvalidNameError:
        return  # not a valid project id at all: cannot collide
    assert GLOBAL_REGISTRY_BUCKET not in produced
    assert PUBLIC_MEMORY_BUCKET not in produced
    assert user_memory_bucket("0123456789abcdef") not in produced


def test_kv_and_stream_names_use_only_allowed_characters() -> None:
    pn = ProjectNames("p-" + "x" * 61)  # longest project id
    for key, value in all_names(pn).items():
        if "." in value:  # a subject
            assert all(value.split(".")), key
            continue
        assert set(value) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"), key
        assert len(value) <= 255, key
    for bucket in (GLOBAL_REGISTRY_BUCKET, PUBLIC_MEMORY_BUCKET, user_memory_bucket("0123456789abcdef")):
        assert set(bucket) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_")


def _matches(filter_subject: str, subject: str) -> bool:
    """NATS subject matching: '*' one token, '>' one or more trailing tokens."""
    f, s = filter_subject.split("."), subject.split(".")
    for i, token in enumerate(f):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(f) == len(s)


def test_project_subjects_fall_only_under_their_own_filters() -> None:
    a, b = ProjectNames("alpha"), ProjectNames("beta")
    concrete = {
        a.inbox_subject(AGENT): "inbox_subjects",
        a.work_subject("python", "default", None, 3): "work_subjects",
        a.dlq_subject("python"): "dlq_subjects",
        a.event_subject("work", "created"): "events_subjects",
    }
    for subject, filter_name in concrete.items():
        assert _matches(getattr(a, filter_name), subject), (filter_name, subject)
        assert not _matches(getattr(b, filter_name), subject), (filter_name, subject)
    assert _matches(a.event_filter("work"), a.event_subject("work", "created"))
    assert not _matches(a.event_filter("agent"), a.event_subject("work", "created"))
    assert not _matches(b.event_filter("work"), a.event_subject("work", "created"))


def test_subjects_have_exactly_the_expected_tokens() -> None:
    pn = ProjectNames("my-proj")
    assert pn.channel_subject("roadmap").split(".") == ["loom", "my-proj", "chan", "roadmap"]
    assert pn.inbox_subject(AGENT).split(".") == ["loom", "my-proj", "inbox", AGENT]
    assert pn.inbox_subjects.split(".") == ["loom", "my-proj", "inbox", ">"]
    assert pn.control_subject(AGENT).split(".") == ["loom", "my-proj", "control", AGENT]
    assert pn.work_subject("python", "default", None, 7).split(".") == [
        "loom",
        "my-proj",
        "work",
        "q",
        "python",
        "default",
        names.ANY_AGENT_TYPE,
        "p07",
    ]
    assert pn.work_subject("python", "prod", "reviewer", 10).split(".")[-3:] == ["prod", "reviewer", "p10"]
    assert pn.work_subjects.split(".") == ["loom", "my-proj", "work", "q", ">"]
    assert pn.dlq_subject("python").split(".") == ["loom", "my-proj", "dlq", "python"]
    assert pn.event_subject("spinup", "started").split(".") == [
        "loom",
        "my-proj",
        "events",
        "spinup",
        "started",
    ]
    assert pn.event_filter("target").split(".") == ["loom", "my-proj", "events", "target", ">"]
    assert pn.event_filter() == pn.events_subjects == "loom.my-proj.events.>"


def test_work_subject_round_trips_and_sorts_by_priority() -> None:
    pn = ProjectNames("my-proj")
    subject = pn.work_subject("code-review", "prod", "reviewer", 9)
    parts = pn.parse_work_subject(subject)
    assert parts is not None
    assert (parts.capability, parts.boundary, parts.agent_type, parts.priority) == (
        "code-review",
        "prod",
        "reviewer",
        9,
    )
    any_type = pn.parse_work_subject(pn.work_subject("python", "default", None, 1))
    assert any_type is not None and any_type.agent_type is None
    assert pn.parse_work_subject(ProjectNames("other").work_subject("python", "default", None, 1)) is None
    assert pn.parse_work_subject("loom.my-proj.chan.roadmap") is None
    # two-digit priority tokens sort lexically in priority order
    tokens = [pn.work_subject("python", "default", None, p).rsplit(".", 1)[1] for p in range(1, 11)]
    assert sorted(tokens) == tokens


def test_a_review_subject_names_the_agent_it_is_not_for() -> None:
    pn = ProjectNames("my-proj")
    subject = pn.work_subject("review", "prod", None, 7, AGENT)
    assert subject == f"loom.my-proj.work.q.review.prod._any.p07.not-{AGENT}"
    parts = pn.parse_work_subject(subject)
    assert parts is not None and (parts.capability, parts.priority, parts.not_for) == ("review", 7, AGENT)
    assert pn.parse_work_subject(pn.work_subject("review", "prod", None, 7)).not_for is None  # type: ignore[union-attr]
    for bad in (f"{subject[:-1]}", subject.replace("not-", "nor-"), f"{subject}.x"):
        assert pn.parse_work_subject(bad) is None, bad
    with pytest.raises(InvalidNameError) as refused:
        pn.work_subject("review", "prod", None, 7, "someone")
    assert refused.value.field == "not_for"


def test_a_reserved_subject_names_the_one_agent_it_is_for() -> None:
    pn = ProjectNames("my-proj")
    subject = pn.work_subject("code", "default", None, 5, only_for=AGENT)
    assert subject == f"loom.my-proj.work.q.code.default._any.p05.for-{AGENT}"
    parts = pn.parse_work_subject(subject)
    assert parts is not None and (parts.only_for, parts.not_for) == (AGENT, None)
    assert pn.parse_work_subject(subject.replace("for-", "fur-")) is None
    with pytest.raises(InvalidNameError) as refused:
        pn.work_subject("code", "default", None, 5, only_for="someone")
    assert refused.value.field == "only_for"


def test_work_consumer_only_for_own_queue_subjects() -> None:
    a, b = ProjectNames("alpha"), ProjectNames("beta")
    subject = a.work_subject("python", "default", None, 5)
    assert a.work_consumer(subject) != a.work_consumer(a.work_subject("python", "default", None, 6))
    with pytest.raises(InvalidNameError, match="work queue subject"):
        b.work_consumer(subject)


def test_project_of_subject() -> None:
    pn = ProjectNames("alpha-2")
    for subject in (
        pn.channel_subject("roadmap"),
        pn.inbox_subject(AGENT),
        pn.work_subject("python", "default", None, 5),
        pn.event_subject("agent", "online"),
        pn.control_subject(AGENT),
    ):
        assert project_of_subject(subject) == "alpha-2"
    assert project_of_subject("loom") is None
    assert project_of_subject("other.alpha.chan.x") is None
    assert project_of_subject("loom.Not_Valid.chan.x") is None
    assert project_of_subject("") is None
    assert project_of_subject("LOOM.alpha.chan.x") is None


# -- bad names: InvalidNameError whose message names the field and the rule ------


def _assert_rejected(fn: Callable[[Any], object], value: object, field: str, rule: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        fn(value)
    assert info.value.field == field
    assert info.value.rule == rule
    message = str(info.value)
    assert message == f"{field}: must be {rule}", message  # the field and the rule, never the value
    assert info.value.message == message and info.value.code == "invalid"
    assert isinstance(info.value, ValueError)  # pydantic validators turn it into a field error


BAD_PROJECT_IDS = ["", "-abc", "Abc", "a.b", "a b", "a*", "a>", "a_b", "x" * 64, "ä", 123, None]


@pytest.mark.parametrize("value", BAD_PROJECT_IDS)
def test_bad_project_ids_rejected(value: object) -> None:
    _assert_rejected(names.validate_project_id, value, "project_id", PROJECT_ID_RULE)
    _assert_rejected(ProjectNames, value, "project_id", PROJECT_ID_RULE)


@pytest.mark.parametrize("value", ["a", "0", "a-", "x" * 63, "t-123abc"])
def test_good_project_ids_accepted(value: str) -> None:
    assert ProjectNames(value).project_id == value


@pytest.mark.parametrize(
    "value",
    ["", "0123456789abcdef0123456789abcde", AGENT + "0", AGENT.upper(), "g" * 32, AGENT[:-1] + ".", 5],
)
def test_bad_agent_ids_rejected(value: object) -> None:
    pn = ProjectNames("alpha")
    _assert_rejected(names.validate_agent_id, value, "agent_id", AGENT_ID_RULE)
    _assert_rejected(pn.inbox_subject, value, "agent_id", AGENT_ID_RULE)
    _assert_rejected(pn.inbox_consumer, value, "agent_id", AGENT_ID_RULE)
    _assert_rejected(pn.control_subject, value, "agent_id", AGENT_ID_RULE)


@pytest.mark.parametrize("value", ["", "Upper", "a_b", "a.b", "a b", "x" * 65, None])
def test_bad_handles_rejected(value: object) -> None:
    _assert_rejected(names.validate_handle, value, "handle", HANDLE_RULE)


@pytest.mark.parametrize("value", ["-", "x" * 64, "0-lead", "a--b"])
def test_good_handles_accepted(value: str) -> None:
    assert names.validate_handle(value) == value


BAD_TOKENS = ["", "-x", "_any", "a.b", "a*", ">", "*", "A", "a b", "x" * 65, "ü", None, 3]


@pytest.mark.parametrize("value", BAD_TOKENS)
def test_bad_capabilities_rejected(value: object) -> None:
    pn = ProjectNames("alpha")
    _assert_rejected(names.validate_capability, value, "capability", TOKEN_RULE)
    _assert_rejected(pn.dlq_subject, value, "capability", TOKEN_RULE)
    _assert_rejected(lambda v: pn.work_subject(v, "default", None, 5), value, "capability", TOKEN_RULE)


@pytest.mark.parametrize("value", BAD_TOKENS)
def test_bad_channels_rejected(value: object) -> None:
    pn = ProjectNames("alpha")
    _assert_rejected(names.validate_channel, value, "channel", TOKEN_RULE)
    _assert_rejected(pn.channel_subject, value, "channel", TOKEN_RULE)
    _assert_rejected(pn.channel_stream, value, "channel", TOKEN_RULE)


@pytest.mark.parametrize("value", BAD_TOKENS)
def test_bad_boundaries_and_agent_types_rejected(value: object) -> None:
    pn = ProjectNames("alpha")
    _assert_rejected(names.validate_boundary, value, "boundary", TOKEN_RULE)
    _assert_rejected(names.validate_agent_type, value, "agent_type", TOKEN_RULE)
    _assert_rejected(lambda v: pn.work_subject("python", v, None, 5), value, "boundary", TOKEN_RULE)
    if value is not None:  # None means "any type" for a work subject
        _assert_rejected(
            lambda v: pn.work_subject("python", "default", v, 5), value, "required_agent_type", TOKEN_RULE
        )


@pytest.mark.parametrize("value", [0, 11, -1, True, False, "5", 5.0, None])
def test_bad_priorities_rejected(value: object) -> None:
    rule = "an integer from 1 to 10"
    _assert_rejected(names.validate_priority, value, "priority", rule)
    _assert_rejected(
        lambda v: ProjectNames("alpha").work_subject("python", "default", None, v), value, "priority", rule
    )


@pytest.mark.parametrize("value", ["", "0123456789abcde", "0123456789ABCDEF", "0123456789abcdefa", None])
def test_bad_user_ids_rejected(value: object) -> None:
    _assert_rejected(names.validate_user_id, value, "user_id", USER_ID_RULE)
    _assert_rejected(user_memory_bucket, value, "user_id", USER_ID_RULE)


def test_bad_event_kind_and_action_rejected() -> None:
    pn = ProjectNames("alpha")
    with pytest.raises(InvalidNameError, match=r"^kind: must be one of work, agent"):
        pn.event_subject("job", "created")
    with pytest.raises(InvalidNameError, match="kind"):
        pn.event_filter("job")
    _assert_rejected(lambda v: pn.event_subject("work", v), "a.b", "action", TOKEN_RULE)


def test_field_name_can_be_overridden_for_messages() -> None:
    with pytest.raises(InvalidNameError, match=r"^LOOM_PROJECT_ID: must be "):
        names.validate_project_id("Bad", "LOOM_PROJECT_ID")


def test_project_of_spinups_stream() -> None:
    assert project_of_spinups_stream("KV_" + ProjectNames("alpha-2").spinups_bucket) == "alpha-2"
    assert project_of_spinups_stream("KV_" + ProjectNames("alpha-2").targets_bucket) is None
    assert project_of_spinups_stream("KV_loom-Not_Valid-spinups") is None
    assert project_of_spinups_stream("KV_loom--spinups") is None
    assert project_of_spinups_stream("KV_loom-_global-spinups") is None
    assert project_of_spinups_stream("loom-alpha-spinups") is None  # a bucket, not its stream
    assert project_of_spinups_stream("A-crowd-0001") is None


def test_project_resource_recognises_the_projects_own_streams_and_buckets() -> None:
    pn = ProjectNames("alpha-2")
    for stream in (
        pn.work_stream,
        pn.dlq_stream,
        pn.events_stream,
        pn.inbox_stream,
        pn.channel_stream("ops"),
    ):
        assert project_resource(stream) == ("alpha-2", stream, False)
    for bucket in (pn.registry_bucket, pn.config_bucket, pn.work_records_bucket, pn.memory_bucket):
        assert project_resource(kv_stream(bucket)) == ("alpha-2", bucket, True)
    assert project_resource(pn.context_stream) is None  # not among the resources listed
    assert project_resource(pn.registry_bucket) is None  # a bucket, not its stream
    assert project_resource("LOOM-alpha-2-CHAN-Not.Valid") is None
    assert project_resource("LOOM-" + "a" * 64 + "-WORK") is None  # no project id is that long
    assert project_resource(kv_stream(GLOBAL_REGISTRY_BUCKET)) is None
    assert project_resource("A-crowd-0001") is None


def test_patterns_are_the_validators_rules() -> None:
    import re

    assert re.fullmatch(names.anchored(names.TOKEN_PATTERN), "code-review_2")
    assert not re.search(names.anchored(names.TOKEN_PATTERN), "ok but not.this")
    for value in ("0" * 32, "0" * 31, "g" * 32):
        assert (re.fullmatch(names.ID_PATTERN, value) is not None) == names.is_work_id(value)
    assert ProjectNames("p").channel_subjects == "loom.p.chan.*"


def test_context_names() -> None:
    pn = ProjectNames("proj")
    assert pn.context_stream == "LOOM-proj-CTX"
    assert pn.context_subject(AGENT) == f"loom.proj.ctx.{AGENT}"
    assert pn.parse_context_subject(pn.context_subject(AGENT)) == AGENT
    assert pn.parse_context_subject("loom.other.ctx." + AGENT) is None
    assert pn.parse_context_subject("loom.proj.ctx.*") is None
    with pytest.raises(InvalidNameError) as err:
        pn.context_subject("a.>")
    assert err.value.field == "tree_id" and "a.>" not in err.value.message
