"""``shuttle targets list|show|add|update|remove|enable|disable|test``: the
spin-up targets Weft may start agents from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from shuttle.app import AllOpt, CursorOpt, JsonOpt, LimitOpt, QuietOpt, out, state
from shuttle.client import seg
from shuttle.errors import UsageError
from shuttle.listing import fetch, more_hint
from shuttle.output import console, emit_json, escape, fields, say
from shuttle.views import target_fields, target_table

app = typer.Typer(help="Manage spin-up targets (local, ssh, kubernetes, github-actions, webhook).")
app.info.no_args_is_help = True

MECHANISMS = ("local", "ssh", "kubernetes", "github-actions", "webhook")

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
# per mechanism
CommandOpt = Annotated[str | None, typer.Option("--command", help="[local, ssh] command line to run.")]
CwdOpt = Annotated[str | None, typer.Option("--cwd", help="[local] working directory.")]
EnvOpt = Annotated[
    list[str] | None, typer.Option("--env", help="[local, ssh] KEY=VALUE for the agent (repeat).")
]
HostOpt = Annotated[str | None, typer.Option("--host", help="[ssh] host name or address.")]
PortOpt = Annotated[int | None, typer.Option("--port", min=1, max=65535, help="[ssh] port.")]
UserOpt = Annotated[str | None, typer.Option("--user", help="[ssh] user.")]
KeyFileOpt = Annotated[
    str | None, typer.Option("--key-file", help="[ssh] private key file (else the agent).")
]
KnownHostsOpt = Annotated[str | None, typer.Option("--known-hosts", help="[ssh] known_hosts file.")]
HostKeyOpt = Annotated[
    str | None, typer.Option("--host-key-policy", help="[ssh] strict or accept-new (explicit, never off).")
]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="[kubernetes] namespace.")]
ImageOpt = Annotated[str | None, typer.Option("--image", help="[kubernetes] container image.")]
RepoOpt = Annotated[str | None, typer.Option("--repo", help="[github-actions] owner/name.")]
WorkflowOpt = Annotated[str | None, typer.Option("--workflow", help="[github-actions] workflow file or id.")]
RefOpt = Annotated[str | None, typer.Option("--ref", help="[github-actions] branch or tag.")]
InputOpt = Annotated[list[str] | None, typer.Option("--input", help="[github-actions] KEY=VALUE (repeat).")]
UrlOpt = Annotated[str | None, typer.Option("--url", help="[webhook] URL to call to start an agent.")]
StopUrlOpt = Annotated[str | None, typer.Option("--stop-url", help="[webhook] URL to call to stop it.")]
SecretEnvOpt = Annotated[
    str | None,
    typer.Option("--secret-env", help="[webhook, github-actions] env var on Weft holding the secret."),
]


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag}: {raw!r} must be KEY=VALUE")
        out_[key] = value
    return out_


def _mechanism_config(**flags: Any) -> dict[str, Any]:
    """Per-mechanism flags to the target's ``config`` object."""
    import shlex

    config: dict[str, Any] = {}
    if flags["command"] is not None:
        try:
            config["command"] = shlex.split(flags["command"])
        except ValueError as exc:
            raise UsageError(f"--command: cannot split {flags['command']!r} ({exc})") from None
    simple = {
        "cwd": "cwd",
        "host": "host",
        "port": "port",
        "user": "user",
        "key_file": "key_file",
        "known_hosts": "known_hosts",
        "host_key_policy": "host_key_policy",
        "namespace": "namespace",
        "image": "image",
        "repo": "repo",
        "workflow": "workflow",
        "ref": "ref",
        "url": "url",
        "stop_url": "stop_url",
        "secret_env": "secret_env",
    }
    for flag, key in simple.items():
        if flags[flag] is not None:
            config[key] = flags[flag]
    if flags["env"]:
        config["env"] = _pairs(flags["env"], "--env")
    if flags["input"]:
        config["inputs"] = _pairs(flags["input"], "--input")
    for key, value in _pairs(flags["set_"], "--set").items():
        try:
            config[key] = json.loads(value)
        except ValueError:
            config[key] = value
    return config


def _load_spec(path: str) -> dict[str, Any]:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--from-file {path}: cannot read it ({exc.strerror or exc})") from None
    data: Any
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UsageError(f"--from-file {path}: not valid YAML ({' '.join(str(exc).split())})") from None
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--from-file {path}: not valid JSON ({exc})") from None
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
        str | None, typer.Option("--mechanism", "-m", help=f"One of: {', '.join(MECHANISMS)}.")
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
    host: HostOpt = None,
    port: PortOpt = None,
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    known_hosts: KnownHostsOpt = None,
    host_key_policy: HostKeyOpt = None,
    namespace: NamespaceOpt = None,
    image: ImageOpt = None,
    repo: RepoOpt = None,
    workflow: WorkflowOpt = None,
    ref: RefOpt = None,
    input_: InputOpt = None,
    url: UrlOpt = None,
    stop_url: StopUrlOpt = None,
    secret_env: SecretEnvOpt = None,
    set_: SetOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Register a target from per-mechanism flags or --from-file."""
    body: dict[str, Any] = _load_spec(from_file) if from_file else {}
    if name is not None:
        body["name"] = name
    if mechanism is not None:
        body["mechanism"] = mechanism
    if body.get("mechanism") not in MECHANISMS:
        given = body.get("mechanism")
        raise UsageError(
            f"--mechanism: {'is required' if given is None else repr(given) + ' is invalid'}; "
            f"must be one of {', '.join(MECHANISMS)}"
        )
    if not body.get("name"):
        raise UsageError("NAME is required (or a name in --from-file)")
    body.update(_common(agent_type, capability, boundary, max_concurrent, cooldown, idle_timeout, tag))
    config = dict(body.get("config") or {})
    config.update(
        _mechanism_config(
            command=command, cwd=cwd, env=env, host=host, port=port, user=user, key_file=key_file,
            known_hosts=known_hosts, host_key_policy=host_key_policy, namespace=namespace, image=image,
            repo=repo, workflow=workflow, ref=ref, input=input_, url=url, stop_url=stop_url,
            secret_env=secret_env, set_=set_,
        )
    )  # fmt: skip
    body["config"] = config
    if disabled:
        body["enabled"] = False
    created = state(ctx).client().post("/api/targets", body)
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
    host: HostOpt = None,
    port: PortOpt = None,
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    known_hosts: KnownHostsOpt = None,
    host_key_policy: HostKeyOpt = None,
    namespace: NamespaceOpt = None,
    image: ImageOpt = None,
    repo: RepoOpt = None,
    workflow: WorkflowOpt = None,
    ref: RefOpt = None,
    input_: InputOpt = None,
    url: UrlOpt = None,
    stop_url: StopUrlOpt = None,
    secret_env: SecretEnvOpt = None,
    set_: SetOpt = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Change some fields of a target; config flags are merged into its config."""
    patch: dict[str, Any] = _load_spec(from_file) if from_file else {}
    patch.update(_common(agent_type, capability, boundary, max_concurrent, cooldown, idle_timeout, tag))
    config = _mechanism_config(
        command=command, cwd=cwd, env=env, host=host, port=port, user=user, key_file=key_file,
        known_hosts=known_hosts, host_key_policy=host_key_policy, namespace=namespace, image=image,
        repo=repo, workflow=workflow, ref=ref, input=input_, url=url, stop_url=stop_url,
        secret_env=secret_env, set_=set_,
    )  # fmt: skip
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
            raise UsageError(f"refusing to remove {target!r} without --yes (stdin is not a terminal)")
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
    """Run the target's health check now; exit 1 when it is unhealthy."""
    result = state(ctx).client().post(f"/api/targets/{seg(target)}/test")
    if out(ctx, json_out).json:
        emit_json(result)
    else:
        fields(
            f"test of {target}", list(result.items()) if isinstance(result, dict) else [("result", result)]
        )
    health = result.get("health") if isinstance(result, dict) else None
    healthy = result.get("healthy") if isinstance(result, dict) else None
    if healthy is False or health == "unhealthy":
        from shuttle.errors import Refused

        detail = result.get("health_detail") or result.get("detail") or "health check failed"
        raise Refused(f"target {target} is unhealthy: {detail}", status=200, code="unhealthy")
