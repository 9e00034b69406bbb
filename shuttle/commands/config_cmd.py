"""``shuttle config get|set|unset|list|path``: Shuttle's own settings file."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.config import KEYS, config_path, mask, parse_value, unknown_key, update_file
from shuttle.output import emit_json, escape, say, table

app = command_group(help="Shuttle's settings: ~/.loom/config.toml, env and flags.", no_args_is_help=True)

KeyArg = Annotated[str, typer.Argument(help=f"One of: {', '.join(KEYS)}.", show_default=False)]
RevealOpt = Annotated[bool, typer.Option("--show-secrets", help="Print the token instead of ***.")]


def _check_key(key: str) -> str:
    if key not in KEYS:
        raise unknown_key("config", key)
    return key


def _path(ctx: typer.Context) -> Any:
    return config_path(state(ctx).config_flag)


@app.command("path")
def path_cmd(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Print which config file Shuttle reads and writes."""
    path = _path(ctx)
    if out(ctx, json_out).json:
        emit_json({"path": str(path), "exists": path.exists()})
    else:
        sys.stdout.write(f"{path}\n")


@app.command("list")
def list_cmd(ctx: typer.Context, json_out: JsonOpt = False, reveal: RevealOpt = False) -> None:
    """Every setting with its effective value and where it came from."""
    settings = state(ctx).settings()
    rows = {
        key: {
            "value": settings.values[key] if reveal else mask(key, settings.values[key]),
            "source": settings.sources[key],
        }
        for key in KEYS
    }
    if out(ctx, json_out).json:
        emit_json({"path": str(settings.path), "settings": rows})
        return
    table(
        f"settings ({settings.path})",
        ["key", "value", "source", "meaning"],
        [
            (k, escape("-" if r["value"] is None else r["value"]), r["source"], escape(KEYS[k].help))
            for k, r in rows.items()
        ],
        drop=(2,),
    )


@app.command("get")
def get_cmd(ctx: typer.Context, key: KeyArg, json_out: JsonOpt = False, reveal: RevealOpt = False) -> None:
    """Print one setting's effective value (empty line when unset)."""
    _check_key(key)
    settings = state(ctx).settings()
    value = settings.values[key] if reveal else mask(key, settings.values[key])
    if out(ctx, json_out).json:
        emit_json({"key": key, "value": value, "source": settings.sources[key]})
    else:
        sys.stdout.write(f"{'' if value is None else value}\n")


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    key: KeyArg,
    value: Annotated[str, typer.Argument(help="The value; '-' reads it from stdin (for tokens).")],
    quiet: QuietOpt = False,
) -> None:
    """Validate and store one setting in the config file."""
    _check_key(key)
    if value == "-":
        value = sys.stdin.readline().strip()
    parsed = parse_value(key, value, "config set")
    path = _path(ctx)
    update_file(path, key, parsed)
    o = out(ctx, quiet_flag=quiet)
    say(f"set {key} in {escape(path)}", quiet=o.quiet)
    _warn_overridden(key)


@app.command("unset")
def unset_cmd(ctx: typer.Context, key: KeyArg, quiet: QuietOpt = False) -> None:
    """Remove one setting from the config file (its default applies again)."""
    _check_key(key)
    path = _path(ctx)
    removed = update_file(path, key, None)
    say(
        f"unset {key} in {escape(path)}" if removed else f"{key} was not set in {escape(path)}",
        quiet=out(ctx, quiet_flag=quiet).quiet,
    )


def _warn_overridden(key: str) -> None:
    import os

    for env_name in KEYS[key].envs:
        if os.environ.get(env_name):
            sys.stderr.write(f"shuttle: note: {env_name} is set and takes precedence over the file\n")
