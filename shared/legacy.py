"""Names from the TypeScript Loom, and what Loom does with each one.

Loom rewrites an existing TypeScript fabric (Warp, Weft, Shuttle, Pattern), and
people bring its environment variables, configuration files, tool arguments
and REST fields with them. None of those may be silently ignored or silently
mean something else here, so every one the original's code or docs used is
listed below with one of four treatments:

* ``same``: Loom reads the same name with the same meaning;
* ``alias``: Loom's settings read it as another name for one of ours (and
  refuse to start when both are set and disagree);
* ``translated``: read with the original's meaning and converted to ours at
  start-up (milliseconds to seconds, ``WARN`` to ``WARNING``, ...);
* ``refused``: start-up stops with the name (never the value) and what to use
  instead, because there is no way to honour it.

Tool arguments, tool names, REST fields and file keys of the original are
never accepted under the old spelling: a call that uses one is refused with
the name to use (:func:`advice`). docs/migrating.md is the readable side of
these tables, and its test keeps the two in step.

Pure and standard-library only: Shuttle imports it at start-up too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from shared.errors import Invalid

Part = Literal["warp", "weft", "pattern", "shuttle"]
How = Literal["same", "alias", "translated", "refused", "not_read"]

ORIGINAL: Final[dict[str, str]] = {
    "warp": "the TypeScript Warp",
    "weft": "the TypeScript Weft",
    "pattern": "the TypeScript Pattern",
    "shuttle": "the TypeScript Shuttle",
}


class LegacySettingError(Invalid, ValueError):
    """A setting of the TypeScript Loom that cannot be honoured, or that disagrees with
    ours; the message names the variable(s) and what to use instead, never a value."""


@dataclass(frozen=True)
class Variable:
    """One environment variable of the original."""

    name: str
    parts: frozenset[Part]
    how: How
    ours: str | None
    """Our variable (or setting) with the same meaning; None when there is none."""
    note: str = ""
    """Why, or what to do instead (shown in errors and the migration guide)."""
    translate: Callable[[str], str | None] | None = None
    """For ``translated``: the original's value to ours (None: nothing to set);
    raises ValueError with the rule when the value cannot be read."""


def _level(value: str) -> str:
    level = value.strip().upper()
    level = {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(level, level)
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("must be one of DEBUG, INFO, WARN, ERROR")
    return level


def _milliseconds_to_seconds(value: str) -> str:
    text = value.strip()
    if not text.isdigit() or int(text) == 0:
        raise ValueError("must be a whole number of milliseconds, more than 0")
    return f"{int(text) / 1000:g}"


def _port(value: str) -> str:
    text = value.strip()
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise ValueError("must be a port number from 0 to 65535")
    return text


def _as_is(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(value: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("must be true or false")


def _scan_disabled(value: str) -> str:
    return "off" if _flag(value) else "warn"


def _scanning(value: str) -> str:
    return "warn" if _flag(value) else "off"


def _debug(value: str) -> str | None:
    # the original turned debug logging on for exactly DEBUG=true and ignored anything else
    return "DEBUG" if value.strip().lower() == "true" else None


def _text_logs(value: str) -> str | None:
    if value.strip().lower() != "text":
        raise ValueError("Loom writes plain-text log lines to stderr; only LOG_FORMAT=text can be honoured")
    return None


def _parts(*names: Part) -> frozenset[Part]:
    return frozenset(names)


AGENTS: Final = _parts("warp", "weft", "pattern")
"""The parts that resolve an identity and connect to NATS themselves."""

VARIABLES: Final[tuple[Variable, ...]] = (
    Variable(
        "NATS_URL", AGENTS, "same", "NATS_URL", "nats://, tls://, ws:// or wss://; credentials in it win"
    ),
    Variable("NATS_USER", AGENTS, "same", "NATS_USER"),
    Variable("NATS_PASS", AGENTS, "same", "NATS_PASS"),
    Variable(
        "USER", AGENTS, "same", "USER", "the login name; the user id (personal scope) is derived from it"
    ),
    Variable(
        "LOOMINAL_PROJECT_ID",
        _parts("warp", "weft", "pattern", "shuttle"),
        "alias",
        "LOOM_PROJECT_ID",
        "any [a-z0-9][a-z0-9-]{0,62}, not only 16 hex; without it the id is derived from the project path "
        "(the original Pattern used 'default')",
    ),
    Variable(
        "NATS_PROJECT_ID",
        AGENTS,
        "alias",
        "LOOM_PROJECT_ID",
        "the name the original Weft's Claude Code set-up put in Warp's MCP settings; read as the project id",
    ),
    Variable("LOOMINAL_AGENT_ID", AGENTS, "alias", "LOOM_AGENT_ID", "32 lowercase hex"),
    Variable(
        "LOOMINAL_SUBAGENT_TYPE",
        AGENTS,
        "alias",
        "LOOM_SUBAGENT_TYPE",
        "a real sub-agent: its own id derived from the parent's, which it records; it cannot read the "
        "parent's core memories or change the parent's memories",
    ),
    Variable("MCP_PROJECT_PATH", AGENTS, "alias", "LOOM_PROJECT_PATH"),
    Variable(
        "LOG_LEVEL",
        _parts("warp"),
        "translated",
        "LOOM_LOG_LEVEL",
        "DEBUG, INFO, WARN, ERROR (WARN is read as WARNING)",
        _level,
    ),
    Variable(
        "LOG_LEVEL",
        _parts("weft"),
        "translated",
        "WEFT_LOG_LEVEL",
        "debug, info, warn, error (WARN is read as WARNING)",
        _level,
    ),
    Variable(
        "LOG_FORMAT",
        _parts("warp"),
        "translated",
        None,
        "text is what Loom writes; json cannot be honoured and stops start-up",
        _text_logs,
    ),
    Variable(
        "WORKQUEUE_ACK_TIMEOUT",
        _parts("warp"),
        "translated",
        "LOOM_WORK_ACK_WAIT_S",
        "milliseconds in the original, seconds in Loom (300000 becomes 300)",
        _milliseconds_to_seconds,
    ),
    Variable(
        "WORKQUEUE_MAX_ATTEMPTS",
        _parts("warp"),
        "refused",
        "max_attempts",
        "attempts are set per work item: max_attempts of warp_work_broadcast, POST /api/work or "
        "shuttle submit --max-attempts (default 3)",
    ),
    Variable(
        "WORKQUEUE_DLQ_TTL",
        _parts("warp"),
        "refused",
        None,
        "dead letters are kept 30 days; discard them with warp_dlq_discard or DELETE /api/dlq/{work_id}",
    ),
    Variable(
        "API_PORT",
        _parts("weft"),
        "translated",
        "WEFT_PORT",
        "the default port is 8080 (the original's was 3000)",
        _port,
    ),
    Variable("API_HOST", _parts("weft"), "translated", "WEFT_HOST", "the default is 127.0.0.1", _as_is),
    Variable(
        "API_TOKENS",
        _parts("weft"),
        "translated",
        "WEFT_API_TOKENS",
        "comma-separated bearer tokens, as before",
        _as_is,
    ),
    Variable(
        "IDLE_TIMEOUT_MS",
        _parts("weft"),
        "refused",
        "idle_timeout_s",
        "idle shutdown is set per spin-up target: idle_timeout_s in the target (seconds, default 300)",
    ),
    Variable(
        "NODE_ENV",
        _parts("weft"),
        "not_read",
        None,
        "a Node.js setting; Loom never puts stack traces in responses",
    ),
    Variable(
        "DEBUG",
        _parts("pattern"),
        "translated",
        "LOOM_LOG_LEVEL",
        "DEBUG=true turns on debug logging, as before; other values change nothing",
        _debug,
    ),
    Variable(
        "PATTERN_CONTENT_SCANNING",
        _parts("pattern"),
        "translated",
        "PATTERN_SECRET_SCAN",
        "false becomes off, true becomes warn",
        _scanning,
    ),
    Variable(
        "PATTERN_DISABLE_CONTENT_SCAN",
        _parts("pattern"),
        "translated",
        "PATTERN_SECRET_SCAN",
        "true becomes off, false becomes warn",
        _scan_disabled,
    ),
    Variable(
        "PATTERN_ENCRYPTION_KEY",
        _parts("pattern"),
        "refused",
        None,
        "Pattern does not encrypt memories (neither did the original, whose README used this name in an "
        "example of the client's own code): encrypt on the client side, and do not give the key to Pattern",
    ),
    Variable(
        "LOOM_API_URL", _parts("shuttle"), "same", "LOOM_API_URL", "the default is http://127.0.0.1:8080"
    ),
    Variable("LOOM_API_TOKEN", _parts("shuttle"), "same", "LOOM_API_TOKEN"),
    Variable("PROJECT_ID", _parts("shuttle"), "alias", "LOOM_PROJECT_ID", "the project Shuttle works on"),
)


def aliases_of(ours: str, parts: Iterable[Part] = AGENTS) -> tuple[str, ...]:
    """The original's names our settings read as ``ours`` (for pydantic's AliasChoices)."""
    return tuple(v.name for v in variables_for(parts) if v.how == "alias" and v.ours == ours)


@dataclass
class Adoption:
    """What start-up does with the original's variables found in the environment."""

    updates: dict[str, str] = field(default_factory=dict)
    """Our variables to set, translated from the original's."""
    notices: list[str] = field(default_factory=list)
    """One line per original variable that was read (to log once logging is set up)."""


def _same(a: str, b: str) -> bool:
    x, y = a.strip(), b.strip()
    try:
        return float(x) == float(y)
    except ValueError:
        return x.casefold() == y.casefold()


def variables_for(parts: Iterable[Part]) -> list[Variable]:
    wanted = set(parts)
    return [v for v in VARIABLES if v.parts & wanted]


def adopt_environment(parts: Iterable[Part], env: Mapping[str, str] | None = None) -> Adoption:
    """Check the original's variables in ``env`` for the given parts.

    Returns the translations to apply; raises :class:`LegacySettingError` naming
    every variable that cannot be honoured and every pair (ours and the
    original's, or two of the original's) that disagrees. No value is ever shown:
    some of them are tokens."""
    source = os.environ if env is None else env
    adoption = Adoption()
    problems: list[str] = []
    claims: dict[str, list[tuple[Variable, str]]] = {}
    for var in variables_for(parts):
        raw = source.get(var.name, "")
        if not raw or var.how == "same":
            continue
        if var.how == "refused":
            problems.append(f"{var.name}: {_origin(var)}; {var.note}")
            continue
        if var.how == "not_read":
            adoption.notices.append(f"{var.name} is not read by Loom: {var.note}")
            continue
        value: str | None = raw
        if var.how == "translated":
            assert var.translate is not None
            try:
                value = var.translate(raw)
            except ValueError as exc:
                problems.append(f"{var.name}: {exc}")
                continue
        if value is None or var.ours is None:
            continue
        claims.setdefault(var.ours, []).append((var, value))
        read_as = "translated to" if var.how == "translated" else "read as"
        adoption.notices.append(
            f"{var.name} ({_origin(var)}) is {read_as} {var.ours}; rename it to {var.ours}"
        )
    for ours, given in claims.items():
        mine = source.get(ours, "")
        values = [(var.name, value) for var, value in given] + ([(ours, mine)] if mine else [])
        if any(not _same(values[0][1], other) for _, other in values[1:]):
            names = " and ".join(name for name, _ in values)
            problems.append(f"{names} are all set and disagree; keep only {ours}")
            continue
        translated = [value for var, value in given if var.how == "translated"]
        if translated and not mine:  # an alias is read by the settings themselves
            adoption.updates[ours] = translated[0]
    if problems:
        raise LegacySettingError("; ".join(problems))
    return adoption


def apply_environment(parts: Iterable[Part], env: MutableMapping[str, str] | None = None) -> list[str]:
    """:func:`adopt_environment`, then set the translated variables in ``env``
    (``os.environ``) for the settings to read; returns the notices to log."""
    target = os.environ if env is None else env
    adoption = adopt_environment(parts, target)
    target.update(adoption.updates)
    return adoption.notices


def _origin(var: Variable) -> str:
    owners = sorted(var.parts)
    return f"a setting of {ORIGINAL[owners[0]]}" if len(owners) == 1 else "a setting of the TypeScript Loom"


# -- tools, arguments, fields ------------------------------------------------------------------------


@dataclass(frozen=True)
class Renamed:
    """A name of the original's and ours for the same thing (``ours`` None: dropped)."""

    ours: str | None
    note: str = ""

    def advice(self) -> str:
        if self.ours is None:
            return self.note
        return f"use {self.ours}" + (f" ({self.note})" if self.note else "")


ORIGINAL_PRIORITY: Final[dict[int, int]] = {1: 8, 2: 5, 3: 2}
"""The TypeScript Pattern's memory priority (1 high, 2 medium, 3 low) on Loom's scale
(1 low to 10 high, default 5): what an import of its export file uses."""

_PRIORITY_SCALE = (
    "the original's scale was 1 = high, 2 = medium, 3 = low; Loom's is 1 (low) to 10 (high), default 5: "
    "high is 8, medium 5, low 2"
)

TOOLS: Final[dict[str, Renamed]] = {
    # Pattern's tools all gained the pattern_ prefix and lost their dashes
    **{
        name: Renamed(f"pattern_{name.replace('-', '_')}")
        for name in (
            "remember",
            "remember-task",
            "remember-learning",
            "commit-insight",
            "core-memory",
            "forget",
            "recall-context",
            "share-learning",
            "cleanup",
            "export-memories",
            "import-memories",
            "remember-bulk",
            "forget-bulk",
        )
    },
    # Warp's names before its 1.0 (the 1.0 names are ours too)
    "set_handle": Renamed("warp_handle_set"),
    "get_my_handle": Renamed("warp_handle_get"),
    "list_channels": Renamed("warp_channels_list"),
    "send_message": Renamed("warp_channels_send"),
    "read_messages": Renamed("warp_channels_read"),
    "channels_status": Renamed("warp_channels_status"),
    "register_agent": Renamed("warp_registry_register"),
    "discover_agents": Renamed("warp_registry_discover"),
    "get_agent_info": Renamed("warp_registry_get_info"),
    "update_presence": Renamed("warp_registry_update_presence"),
    "deregister_agent": Renamed("warp_registry_deregister"),
    "send_direct_message": Renamed("warp_messages_send_direct"),
    "read_direct_messages": Renamed("warp_messages_read_direct"),
    "broadcast_work_offer": Renamed("warp_work_broadcast"),
    "claim_work": Renamed("warp_work_claim"),
    "list_work": Renamed("warp_work_list"),
    "work_queue_status": Renamed("warp_work_queue_status"),
    "list_dead_letter_items": Renamed("warp_dlq_list"),
    "retry_dead_letter_item": Renamed("warp_dlq_retry"),
    "discard_dead_letter_item": Renamed("warp_dlq_discard"),
}
"""The original's tool name -> ours."""

_MEMORY_ID = {"memoryId": Renamed("memory_id")}
_MEMORY_METADATA = {
    "metadata.tags": Renamed("tags", "a top-level argument"),
    "metadata.priority": Renamed("priority", f"a top-level argument; {_PRIORITY_SCALE}"),
    "metadata.relatedTo": Renamed(
        None, "metadata holds string pairs: give related memory ids as one string, e.g. related_to"
    ),
}

ARGUMENTS: Final[dict[str, dict[str, Renamed]]] = {
    "pattern_remember": _MEMORY_METADATA,
    "pattern_remember_task": _MEMORY_METADATA,
    "pattern_remember_learning": _MEMORY_METADATA,
    "pattern_core_memory": _MEMORY_METADATA,
    "pattern_commit_insight": {
        **_MEMORY_ID,
        "newContent": Renamed("content"),
        "targetScope": Renamed(
            None, "a committed memory keeps its scope; share it with pattern_share_learning instead"
        ),
    },
    "pattern_forget": _MEMORY_ID,
    "pattern_recall_context": {
        "scope": Renamed("scopes", "a list of private, personal, team, public; 'shared' is team"),
        "since": Renamed("updated_after"),
        "minPriority": Renamed("priority_min", _PRIORITY_SCALE),
        "maxPriority": Renamed("priority_max", _PRIORITY_SCALE),
        "createdAfter": Renamed("created_after"),
        "createdBefore": Renamed("created_before"),
        "updatedAfter": Renamed("updated_after"),
        "updatedBefore": Renamed("updated_before"),
    },
    "pattern_share_learning": {
        **_MEMORY_ID,
        "keepOriginal": Renamed("mode", "copy keeps yours, move turns it into the shared one; default copy"),
        "keepPrivate": Renamed("mode", "copy keeps yours, move turns it into the shared one; default copy"),
    },
    "pattern_cleanup": {
        "expireOnly": Renamed(
            None,
            "cleanup only removes your own expired recent/tasks memories; limits are enforced when "
            "storing, never by deleting (see dry_run, older_than_hours)",
        ),
    },
    "pattern_export_memories": {
        "outputPath": Renamed("path", "a .json name inside the export directory"),
        "scope": Renamed("scopes", "a list"),
        "category": Renamed("categories", "a list"),
        "since": Renamed(None, "exports hold all your memories of the chosen scopes and categories"),
        "includeExpired": Renamed(None, "expired memories are gone and cannot be exported"),
    },
    "pattern_import_memories": {
        "inputPath": Renamed("path", "a .json name inside the export directory"),
        "overwriteExisting": Renamed(
            None, "importing the same file again adds nothing; your own memories are never overwritten"
        ),
        "skipInvalid": Renamed(None, "invalid records are always skipped and reported"),
    },
    "pattern_remember_bulk": {
        **{f"memories.{key}": value for key, value in _MEMORY_METADATA.items()},
        "stopOnError": Renamed(None, "each memory succeeds or fails on its own"),
        "validate": Renamed(None, "every memory is validated before any is stored"),
    },
    "pattern_forget_bulk": {
        "memoryIds": Renamed("memory_ids"),
        "stopOnError": Renamed(None, "each id succeeds or fails on its own"),
    },
    "warp_registry_register": {
        "agentType": Renamed("agent_type"),
        "visibility": Renamed("scope", "project-only is team, user-only is personal"),
    },
    "warp_registry_discover": {
        "agentType": Renamed("agent_type"),
        "hostname": Renamed(None, "there is no hostname filter; filter by handle, capability or agent_type"),
        "projectId": Renamed(
            None, "discover lists this project, plus personal and public agents of other projects"
        ),
        "scope": Renamed(None, "there is no scope filter; each entry shows its scope"),
        "includeOffline": Renamed("status", "without status offline agents are listed too"),
    },
    "warp_registry_get_info": {"guid": Renamed("agent_id")},
    "warp_registry_update_presence": {
        "currentTaskCount": Renamed(None, "the task count follows your claims"),
        "capabilities": Renamed(None, "call warp_registry_register again to change capabilities"),
    },
    "warp_messages_send_direct": {
        "recipientGuid": Renamed("recipient_id"),
        "messageType": Renamed("message_type"),
    },
    "warp_messages_read_direct": {
        "messageType": Renamed("message_type"),
        "senderGuid": Renamed("sender_id"),
    },
    "warp_work_broadcast": {
        "taskId": Renamed("task_id"),
        "requiredCapability": Renamed("capability"),
        "contextData": Renamed("context"),
    },
    "warp_work_claim": {
        "timeout": Renamed(None, "a claim never waits: it takes eligible work or returns none")
    },
    "warp_work_list": {
        **{
            name: Renamed(None, "filter by status, capability, boundary, assigned_to or mine")
            for name in ("minPriority", "maxPriority", "deadlineBefore", "deadlineAfter")
        },
    },
    "warp_work_queue_status": {"capability": Renamed(None, "the result has the depth of every capability")},
    "warp_dlq_retry": {
        "itemId": Renamed("work_id"),
        "resetAttempts": Renamed(None, "a retried item always starts again with no attempts used"),
    },
    "warp_dlq_discard": {"itemId": Renamed("work_id")},
}
"""Our tool -> the original's argument (dotted for nested ones) -> what to use."""

REST_FIELDS: Final[dict[str, Renamed]] = {
    "projectId": Renamed("project", "or the X-Loom-Project header"),
    "classification": Renamed("boundary"),
    "guid": Renamed("agent_id"),
    "taskId": Renamed("task_id"),
    "contextData": Renamed("context"),
    "requiredAgentType": Renamed("required_agent_type"),
    "preferredAgentType": Renamed("preferred_agent_type"),
    "agentType": Renamed("agent_type"),
    "healthCheck": Renamed("health_check"),
    "graceful": Renamed(None, "a shutdown always drains first; set grace_s (seconds) for how long"),
    "gracePeriodMs": Renamed("grace_s", "seconds, not milliseconds"),
    "agentGuids": Renamed("agent_ids"),
    "workItemIds": Renamed("work_ids"),
    "filter": Renamed(None, "name the items: agent_ids or work_ids"),
    "reassign": Renamed(None, "a cancelled item is final; submit it again to redo it"),
    "targetIds": Renamed(None, "disable targets one by one: POST /api/targets/{target}/disable"),
    "preventSpinUp": Renamed(None, "a disabled target never starts agents"),
}
"""The original Weft's query parameters and body fields -> ours (names only: they are unambiguous)."""

SHUTTLE_KEYS: Final[dict[str, Renamed]] = {
    "apiUrl": Renamed("api_url"),
    "apiToken": Renamed("api_token"),
    "projectId": Renamed("project_id"),
    "natsUrl": Renamed(None, "Shuttle only talks to Weft; remove it"),
    "defaultBoundary": Renamed(None, "pass -b/--boundary to shuttle submit (default: default); remove it"),
    "defaultPriority": Renamed(None, "pass -P/--priority to shuttle submit (default 5); remove it"),
    "outputFormat": Renamed(None, "pass --json for JSON; remove it"),
}
"""Keys of the original Shuttle's ``~/.loom/config.json`` -> ours."""


def argument_advice(tool: str, name: str) -> str | None:
    """What to use instead of the original's argument ``name`` of our ``tool``, or None."""
    found = ARGUMENTS.get(tool, {}).get(name)
    return None if found is None else f"{name}: this is {_tool_origin(tool)}'s name; {found.advice()}"


def tool_advice(name: str) -> str | None:
    """What to call instead of the original's tool ``name``, or None."""
    found = TOOLS.get(name)
    if found is None or found.ours is None:
        return None
    origin = ORIGINAL["pattern"] if found.ours.startswith("pattern_") else ORIGINAL["warp"]
    where = " (served by pattern, or by warp --with-memory)" if found.ours.startswith("pattern_") else ""
    return f"{name} is {origin}'s tool name; use {found.ours}{where}"


def metadata_advice(key: str) -> str | None:
    """What to use instead of a Pattern ``metadata`` key the TypeScript Pattern gave a
    meaning (its ``priority`` was on another scale: it must never land as a plain pair)."""
    found = _MEMORY_METADATA.get(f"metadata.{key}")
    return None if found is None else f"{key} is {ORIGINAL['pattern']}'s metadata key; {found.advice()}"


def rest_advice(name: str) -> str | None:
    found = REST_FIELDS.get(name)
    return None if found is None else f"this is {ORIGINAL['weft']}'s name; {found.advice()}"


def shuttle_key_advice(name: str) -> str | None:
    found = SHUTTLE_KEYS.get(name)
    return None if found is None else f"this is {ORIGINAL['shuttle']}'s key; {found.advice()}"


def _tool_origin(tool: str) -> str:
    return ORIGINAL["pattern"] if tool.startswith("pattern_") else ORIGINAL["warp"]


# -- configuration files ----------------------------------------------------------------------------

WARP_FILE_KEYS: Final[dict[str, Renamed]] = {
    "namespace": Renamed(
        "LOOM_PROJECT_ID", "the project id is the only isolation key; set it in the environment"
    ),
    "natsUrl": Renamed("NATS_URL", "in the environment"),
    "logging": Renamed("LOOM_LOG_LEVEL", "in the environment; logs are text"),
    "workQueue": Renamed(
        "LOOM_WORK_ACK_WAIT_S", "in the environment, in seconds; attempts are max_attempts per work item"
    ),
}
"""Top-level keys of the original Warp's file other than ``channels``: refused if found in
ours (``.loom/config.json``), where they would otherwise be ignored as another part's."""


def warp_file_key_advice(key: str) -> str | None:
    found = WARP_FILE_KEYS.get(key)
    return None if found is None else f"{key}: this is {ORIGINAL['warp']}'s setting; {found.advice()}"


WARP_PROJECT_FILES: Final = (".mcp-config.json", ".loominal-config.json")
"""The original Warp's project file (its code read the first, its README named the second),
searched from the project folder up to 4 parents."""
WARP_USER_FILE: Final = Path(".nats-mcp") / "config.json"
"""The original Warp's user file, under the home directory."""
_WARP_KEYS = ("namespace", "natsUrl", "workQueue")
_SEARCH_LEVELS = 5


def _looks_like_warp_config(path: Path) -> bool:
    """A file the original Warp would have applied: a JSON object with its list of channels
    or one of its own keys. Anything else with the same name (another tool's file, even one
    with a ``logging`` section) is not ours to judge."""
    try:
        data = json.loads(path.read_bytes() or b"{}")
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict):
        return False
    return isinstance(data.get("channels"), list) or any(key in data for key in _WARP_KEYS)


def legacy_warp_files(project_path: Path, home: Path | None = None) -> list[Path]:
    """The original Warp's configuration files that apply to ``project_path``."""
    found: list[Path] = []
    directory = project_path.expanduser().resolve()
    for _ in range(_SEARCH_LEVELS):
        found.extend(
            directory / name
            for name in WARP_PROJECT_FILES
            if (directory / name).is_file() and _looks_like_warp_config(directory / name)
        )
        if directory.parent == directory:
            break
        directory = directory.parent
    user = (home or Path.home()).expanduser() / WARP_USER_FILE
    if user.is_file() and _looks_like_warp_config(user):
        found.append(user)
    return found


def check_warp_files(project_path: Path, home: Path | None = None) -> None:
    """Refuse to start while the original Warp's configuration would be silently ignored."""
    files = legacy_warp_files(project_path, home)
    if files:
        names = ", ".join(str(path) for path in files)
        raise LegacySettingError(
            f"{names}: {ORIGINAL['warp']}'s configuration, which Warp does not read. Move the channels "
            'to .loom/config.json as a "channels" object keyed by name (description, max_messages, '
            "max_bytes, max_age_s in seconds), set the project with LOOM_PROJECT_ID, then delete or "
            "rename the file (docs/migrating.md)"
        )
