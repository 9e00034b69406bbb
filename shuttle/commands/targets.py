"""``shuttle targets list|show|add|update|remove|enable|disable|test``: the
spin-up targets Weft may start agents from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from loom.transport import seg
from shared.errors import parse_problem
from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, fields, say
from shuttle.views import target_fields, target_table

app = command_group(help="Manage spin-up targets: where and how Weft starts agents.")
app.info.no_args_is_help = True

TargetArg = Annotated[str, typer.Argument(help="Target id or name.", show_default=False)]

# -- options shared by add and update -------------------------------------------
AgentTypeOpt = Annotated[str | None, typer.Option("--agent-type", "-t", help="Agent type it starts.")]
CapOpt = Annotated[list[str] | None, typer.Option("--capability", "-c", help="Capability (repeat).")]
BoundaryOpt = Annotated[list[str] | None, typer.Option("--boundary", "-b", help="Boundary (repeat).")]
MaxOpt = Annotated[int | None, typer.Option("--max-concurrent", min=1, max=1000, help="Agents at once.")]
CooldownOpt = Annotated[float | None, typer.Option("--cooldown", min=0, help="Seconds between spin-ups.")]
IdleOpt = Annotated[
    float | None, typer.Option("--idle-timeout", min=0, help="Stop an idle agent after N s (0: never).")
]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Free-form tag (repeat).")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Mechanism config KEY=VALUE (VALUE parsed as JSON when it can be; repeat)."),
]
# per mechanism (keys of the mechanism's config object in Weft)
CommandOpt = Annotated[str | None, typer.Option("--command", help="[local, ssh, kubernetes] command line.")]
CwdOpt = Annotated[str | None, typer.Option("--cwd", help="[local, ssh] absolute working directory.")]
EnvOpt = Annotated[
    list[str] | None, typer.Option("--env", help="KEY=VALUE for the agent, no secrets (repeat).")
]
NatsUrlOpt = Annotated[str | None, typer.Option("--nats-url", help="NATS URL the agent should use.")]
HostOpt = Annotated[str | None, typer.Option("--host", help="[ssh] host name or address.")]
PortOpt = Annotated[int | None, typer.Option("--port", min=1, max=65535, help="[ssh] port.")]
UserOpt = Annotated[str | None, typer.Option("--user", help="[ssh] user name.")]
KeyFileOpt = Annotated[str | None, typer.Option("--key-file", help="[ssh] private key file.")]
UseAgentOpt = Annotated[
    bool | None, typer.Option("--use-agent/--no-use-agent", help="[ssh] use ssh-agent keys.")
]
KnownHostsOpt = Annotated[str | None, typer.Option("--known-hosts", help="[ssh] known_hosts file.")]
HostKeyOpt = Annotated[str | None, typer.Option("--host-key", help="[ssh] pinned public key.")]
HostKeyPolicyOpt = Annotated[
    str | None, typer.Option("--host-key-policy", help="[ssh] strict, accept-new or insecure.")
]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="[kubernetes] namespace.")]
ImageOpt = Annotated[str | None, typer.Option("--image", help="[kubernetes] container image.")]
ServiceAccountOpt = Annotated[
    str | None, typer.Option("--service-account", help="[kubernetes] service account.")
]
RepoOpt = Annotated[str | None, typer.Option("--repo", help="[github-actions] owner/name.")]
WorkflowOpt = Annotated[str | None, typer.Option("--workflow", help="[github-actions] workflow file or id.")]
RefOpt = Annotated[str | None, typer.Option("--ref", help="[github-actions] branch or tag.")]
InputOpt = Annotated[list[str] | None, typer.Option("--input", help="[github-actions] KEY=VALUE (repeat).")]
TokenEnvOpt = Annotated[
    str | None,
    typer.Option("--token-env", help="[github-actions, kubernetes] env var on Weft with the token."),
]
UrlOpt = Annotated[str | None, typer.Option("--url", help="[webhook] URL called to start an agent.")]
MethodOpt = Annotated[str | None, typer.Option("--method", help="[webhook] HTTP method.")]
BodyOpt = Annotated[
    str | None, typer.Option("--body", help="[webhook] body template ({work_id}, {agent_id}, ...).")
]
StopUrlOpt = Annotated[str | None, typer.Option("--stop-url", help="[webhook] URL called to stop it.")]
HealthUrlOpt = Annotated[str | None, typer.Option("--health-url", help="[webhook] URL for `targets test`.")]
SecretEnvOpt = Annotated[
    str | None, typer.Option("--secret-env", help="[webhook] env var on Weft holding the HMAC secret.")
]

CONFIG_KEYS = {
    "cwd": "cwd",
    "nats_url": "nats_url",
    "host": "host",
    "port": "port",
    "user": "username",
    "key_file": "key_file",
    "use_agent": "use_agent",
    "known_hosts": "known_hosts",
    "host_key": "host_key",
    "host_key_policy": "host_key_policy",
    "namespace": "namespace",
    "image": "image",
    "service_account": "service_account",
    "repo": "repository",
    "workflow": "workflow",
    "ref": "ref",
    "token_env": "token_env",
    "url": "url",
    "method": "method",
    "body": "body",
    "stop_url": "stop_url",
    "health_url": "health_url",
    "secret_env": "secret_env",
}
"""Flag (parameter name) -> key in the target's ``config``."""


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: must be KEY=VALUE")
        out_[key] = value
    return out_


def _mechanism_config(flags: dict[str, Any]) -> dict[str, Any]:
    """Per-mechanism flags to the target's ``config`` object (Weft validates it per mechanism)."""
    import shlex

    config: dict[str, Any] = {}
    if flags.get("command") is not None:
        try:
            config["command"] = shlex.split(flags["command"])
        except ValueError as exc:
            raise UsageError(f"--command: cannot split it into words ({exc})") from None
    for flag, key in CONFIG_KEYS.items():
        if flags.get(flag) is not None:
            config[key] = flags[flag]
    if flags.get("env"):
        config["env"] = _pairs(flags["env"], "--env")
    if flags.get("input_"):
        config["inputs"] = _pairs(flags["input_"], "--input")
    for key, value in _pairs(flags.get("set_"), "--set").items():
        try:
            config[key] = json.loads(value)
        except ValueError:
            config[key] = value
    return config


def _load_spec(path: str) -> dict[str, Any]:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--from-file: cannot read it ({exc.strerror or type(exc).__name__})") from None
    data: Any
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError(f"--from-file {path}: not valid YAML ({parse_problem(exc)})") from None
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--from-file {path}: not valid JSON ({parse_problem(exc)})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--from-file {path}: must hold one target object (name, mechanism, config, ...)")
    return data


def _common(
    agent_type: str | None,
    capability: list[str] | None,
    boundary: list[str] | None,
    max_concurrent: int | None,
    cooldown: float | None,
    idle_timeout: float | None,
    tag: list[str] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if agent_type is not None:
        body["agent_type"] = agent_type
    if capability:
        body["capabilities"] = capability
    if boundary:
        body["boundaries"] = boundary
    if max_concurrent is not None:
        body["max_concurrent"] = max_concurrent
    if cooldown is not None:
        body["cooldown_s"] = cooldown
    if idle_timeout is not None:
        body["idle_timeout_s"] = idle_timeout
    if tag:
        body["tags"] = tag
    return body


def _done(ctx: typer.Context, target: Any, verb: str, json_out: bool, quiet: bool) -> None:
    o = out(ctx, json_out, quiet)
    if o.json:
        emit_json(target)
    elif o.quiet:
        typer.echo(target.get("id", "") if isinstance(target, dict) else "")
    else:
        name = target.get("name", "") if isinstance(target, dict) else ""
        tid = target.get("id", "") if isinstance(target, dict) else ""
        say(f"{verb} target {escape(name)} ({escape(tid)})")


@app.command("list")
def list_cmd(
    ctx: typer.Context,
    limit: LimitOpt = 100,
    cursor: CursorOpt = None,
    all_pages: AllOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Every target with its mechanism, health and last spin-up."""
    o = out(ctx, json_out, quiet)
    result = fetch(state(ctx).client(), "/api/targets", {}, limit=limit, cursor=cursor, follow=all_pages)
    if o.json:
        emit_json(result)
    elif o.quiet:
        for t in result["items"]:
            typer.echo(t.get("id", ""))
    else:
        console().print(target_table(result["items"]))
        hint = more_hint(result)
        if hint:
            say(hint)


@app.command("mechanisms")
def mechanisms_cmd(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """The mechanisms Weft can start agents with, and the settings each one's config takes."""
    o = out(ctx, json_out, quiet)
    found = state(ctx).client().get("/api/mechanisms")
    if o.json:
        emit_json(found)
        return
    for mechanism in found:
        name = str(mechanism.get("name", ""))
        if o.quiet:
            typer.echo(name)
            continue
        schema = mechanism.get("config_schema") or {}
        required = [key for key in schema.get("properties") or {} if key in (schema.get("required") or [])]
        optional = [key for key in schema.get("properties") or {} if key not in required]
        settings = ", ".join([*(f"{key} (required)" for key in required), *optional])
        say(f"[bold]{escape(name)}[/bold]: {escape(settings)}")


@app.command("show")
def show_cmd(ctx: typer.Context, target: TargetArg, json_out: JsonOpt = False) -> None:
    """One target, with its mechanism config (secrets are never stored in it)."""
    data = state(ctx).client().get(f"/api/targets/{seg(target)}")
    if out(ctx, json_out).json:
        emit_json(data)
    else:
        target_fields(data)


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Target name (one token).", show_default=False)] = None,
    mechanism: Annotated[
        str | None,
        typer.Option(
            "--mechanism", "-m", help="How it starts agents: `shuttle targets mechanisms` lists them."
        ),
    ] = None,
    from_file: Annotated[
        str | None, typer.Option("--from-file", help="JSON/YAML target spec; flags override its fields.")
    ] = None,
    agent_type: AgentTypeOpt = None,
    capability: CapOpt = None,
    boundary: BoundaryOpt = None,
    max_concurrent: MaxOpt = None,
    cooldown: CooldownOpt = None,
    idle_timeout: IdleOpt = None,
    tag: TagOpt = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Register it switched off.")] = False,
    command: CommandOpt = None,
    cwd: CwdOpt = None,
    env: EnvOpt = None,
    nats_url: NatsUrlOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    use_agent: UseAgentOpt = None,
    known_hosts: KnownHostsOpt = None,
    host_key: HostKeyOpt = None,
    host_key_policy: HostKeyPolicyOpt = None,
    namespace: NamespaceOpt = None,
    image: ImageOpt = None,
    service_account: ServiceAccountOpt = None,
    repo: RepoOpt = None,
    workflow: WorkflowOpt = None,
    ref: RefOpt = None,
    input_: InputOpt = None,
    token_env: TokenEnvOpt = None,
    url: UrlOpt = None,
    method: MethodOpt = None,
    body: BodyOpt = None,
    stop_url: StopUrlOpt = None,
    health_url: HealthUrlOpt = None,
    secret_env: SecretEnvOpt = None,
    set_: SetOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Register a target from per-mechanism flags or --from-file."""
    spec: dict[str, Any] = _load_spec(from_file) if from_file else {}
    if name is not None:
        spec["name"] = name
    if mechanism is not None:
        spec["mechanism"] = mechanism
    if spec.get("mechanism") is None:  # which ones exist is Weft's to say (and to check)
        raise UsageError("--mechanism: is required; `shuttle targets mechanisms` lists them")
    if not spec.get("name"):
        raise UsageError("NAME is required (or a name in --from-file)")
    spec.update(_common(agent_type, capability, boundary, max_concurrent, cooldown, idle_timeout, tag))
    config = dict(spec.get("config") or {})
    config.update(_mechanism_config(ctx.params))
    spec["config"] = config
    if disabled:
        spec["enabled"] = False
    created = state(ctx).client().post("/api/targets", spec)
    _done(ctx, created, "added", json_out, quiet)


@app.command("update")
def update_cmd(
    ctx: typer.Context,
    target: TargetArg,
    from_file: Annotated[
        str | None, typer.Option("--from-file", help="JSON/YAML with the fields to change.")
    ] = None,
    agent_type: AgentTypeOpt = None,
    capability: CapOpt = None,
    boundary: BoundaryOpt = None,
    max_concurrent: MaxOpt = None,
    cooldown: CooldownOpt = None,
    idle_timeout: IdleOpt = None,
    tag: TagOpt = None,
    command: CommandOpt = None,
    cwd: CwdOpt = None,
    env: EnvOpt = None,
    nats_url: NatsUrlOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    use_agent: UseAgentOpt = None,
    known_hosts: KnownHostsOpt = None,
    host_key: HostKeyOpt = None,
    host_key_policy: HostKeyPolicyOpt = None,
    namespace: NamespaceOpt = None,
    image: ImageOpt = None,
    service_account: ServiceAccountOpt = None,
    repo: RepoOpt = None,
    workflow: WorkflowOpt = None,
    ref: RefOpt = None,
    input_: InputOpt = None,
    token_env: TokenEnvOpt = None,
    url: UrlOpt = None,
    method: MethodOpt = None,
    body: BodyOpt = None,
    stop_url: StopUrlOpt = None,
    health_url: HealthUrlOpt = None,
    secret_env: SecretEnvOpt = None,
    set_: SetOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Change some fields of a target; config flags are merged into its config."""
    patch: dict[str, Any] = _load_spec(from_file) if from_file else {}
    patch.update(_common(agent_type, capability, boundary, max_concurrent, cooldown, idle_timeout, tag))
    config = _mechanism_config(ctx.params)
    client = state(ctx).client()
    if config:
        current = client.get(f"/api/targets/{seg(target)}")
        merged = dict(current.get("config") or {}) if isinstance(current, dict) else {}
        merged.update(patch.get("config") or {})
        merged.update(config)
        patch["config"] = merged
    if not patch:
        raise UsageError("nothing to change: give at least one field flag or --from-file")
    updated = client.patch(f"/api/targets/{seg(target)}", patch)
    _done(ctx, updated, "updated", json_out, quiet)


@app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    target: TargetArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Delete a target (agents it started keep running until idle)."""
    if not yes:
        import sys

        if not sys.stdin.isatty():
            raise UsageError("refusing to remove the target without --yes (stdin is not a terminal)")
        typer.confirm(f"Remove target {target}?", abort=True)
    result = state(ctx).client().delete(f"/api/targets/{seg(target)}")
    o = out(ctx, json_out, quiet)
    if o.json:
        emit_json(result if result is not None else {"removed": target})
    else:
        say(f"removed target {escape(target)}", quiet=o.quiet)


def _toggle(ctx: typer.Context, target: str, action: str, json_out: bool, quiet: bool) -> None:
    result = state(ctx).client().post(f"/api/targets/{seg(target)}/{action}")
    _done(ctx, result, f"{action}d", json_out, quiet)


@app.command("enable")
def enable_cmd(
    ctx: typer.Context, target: TargetArg, json_out: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Allow Weft to spin agents up from this target again."""
    _toggle(ctx, target, "enable", json_out, quiet)


@app.command("disable")
def disable_cmd(
    ctx: typer.Context, target: TargetArg, json_out: JsonOpt = False, quiet: QuietOpt = False
) -> None:
    """Stop Weft from spinning agents up from this target."""
    _toggle(ctx, target, "disable", json_out, quiet)


@app.command("test")
def test_cmd(ctx: typer.Context, target: TargetArg, json_out: JsonOpt = False) -> None:
    """Check the target can start agents now; exit 1 when it cannot."""
    result = state(ctx).client().post(f"/api/targets/{seg(target)}/test")
    if out(ctx, json_out).json:
        emit_json(result)
    else:
        fields(
            f"test of {target}", list(result.items()) if isinstance(result, dict) else [("result", result)]
        )
    if isinstance(result, dict) and result.get("ok") is False:
        from shuttle.errors import Refused

        detail = result.get("detail") or result.get("health") or "check failed"
        raise Refused(f"target {target} failed its test: {detail}", status=200, code="unhealthy")
