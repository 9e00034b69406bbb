"""``shuttle``: the root command, global flags and the error contract.

Command groups live in :mod:`shuttle.commands` (one module each); this module
wires them together and turns every expected failure into one stderr line and
an exit code (0 ok, 1 Weft refused, 2 usage, 3 Weft unreachable).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from shuttle import __version__, fastparams, tracing
from shuttle.app import State, command_group, state
from shuttle.errors import EXIT_REFUSED, EXIT_USAGE, ClientError, ShuttleError, exit_code_of
from shuttle.output import error_line, set_no_color

if TYPE_CHECKING:
    from typer import _click as click


class ShuttleGroup(TyperGroup):
    """Root group whose ``main`` maps failures onto one line and an exit code,
    both for the console script and for ``CliRunner``; its commands are loaded as they
    are looked up (:class:`LazyCommands`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = LazyCommands(self.commands)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

        try:
            rv = super().main(args, prog_name or "shuttle", complete_var, False, windows_expand_args, **extra)
        except (ShuttleError, ClientError) as exc:
            error_line(exc.message)
            sys.exit(exit_code_of(exc))
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(EXIT_USAGE)
        except UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            error_line(f"{exc.format_message().rstrip('.')}{hint}")
            sys.exit(EXIT_USAGE)
        except ClickException as exc:
            error_line(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            error_line("aborted")
            sys.exit(EXIT_REFUSED)
        except BrokenPipeError:
            # `shuttle work list | head`: the reader left; exit quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_REFUSED)
        sys.exit(rv if isinstance(rv, int) else 0)


app = command_group(
    cls=ShuttleGroup,
    name="shuttle",
    help="Operate a Loom fleet through Weft: submit and follow work, watch agents, manage targets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"shuttle {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    api_url: Annotated[
        str | None, typer.Option("--api-url", help="Weft's URL [env LOOM_API_URL]", show_default=False)
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", help="Bearer token [env LOOM_API_TOKEN; prefer the env]", show_default=False),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option("--project", "-p", help="Project id sent as X-Loom-Project [env LOOM_PROJECT_ID]"),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--config", help="Config file [env LOOM_CONFIG; default ~/.loom/config.toml]"),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="HTTP timeout in seconds [env LOOM_API_TIMEOUT]")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only ids (or nothing).")] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colours (also: NO_COLOR).")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Operate a Loom fleet through Weft."""
    st = State(
        flags={"api_url": api_url, "api_token": token, "project_id": project, "timeout": timeout},
        config_flag=config,
        json=json_out,
        quiet=quiet,
    )
    ctx.obj = st
    set_no_color(no_color or bool(os.environ.get("NO_COLOR")))
    ctx.call_on_close(st.close)
    finish_span = tracing.start(ctx.invoked_subcommand or "shuttle")
    if finish_span is not None:
        ctx.call_on_close(finish_span)


fastparams.install()


COMMANDS: dict[str, str] = {
    "submit": "submit",
    "watch": "watch",
    "fleet": "fleet",
    "spin-up": "spinup",
    "answer": "questions",
    "defer": "questions",
    "landing": "landing",
    "stats": "stats",
    "usage": "usage",
    "projects": "projects",
    "version": "version",
    "agents": "agents",
    "work": "work",
    "targets": "targets",
    "dlq": "dlq",
    "questions": "questions",
    "leases": "leases",
    "context": "context",
    "repo": "repo",
    "autonomy": "autonomy",
    "notify": "notify",
    "project": "project",
    "budget": "usage",
    "config": "config_cmd",
}
"""Each top-level command and the module of :mod:`shuttle.commands` that defines it, in the
order ``shuttle --help`` lists them. A run imports and builds only the module of the
command it runs (the others cost about 60 ms on every start); help and lookups by name load
what they need (:class:`LazyCommands`)."""


@functools.cache
def _module_commands(module_name: str) -> dict[str, click.Command]:
    """The click commands ``shuttle.commands.<module_name>`` defines: its ``app`` as the
    group of that name, or what its ``register(app)`` adds."""
    import importlib

    from typer.main import get_group

    module = importlib.import_module(f"shuttle.commands.{module_name}")
    holder = command_group()
    if hasattr(module, "register"):
        module.register(holder)
    else:
        (name,) = (n for n, m in COMMANDS.items() if m == module_name)
        holder.add_typer(module.app, name=name)
    return dict(get_group(holder).commands)


class LazyCommands(MutableMapping[str, "click.Command"]):
    """The root group's commands: every name in :data:`COMMANDS` is listed, and its module
    is loaded when the command is first looked up."""

    def __init__(self, added: Mapping[str, click.Command]) -> None:
        self._added = dict(added)

    def __getitem__(self, name: str) -> click.Command:
        if name in self._added:
            return self._added[name]
        if name in COMMANDS:
            return _module_commands(COMMANDS[name])[name]
        raise KeyError(name)

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        del self._added[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._added if name not in COMMANDS)

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._added))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="shuttle")


__all__ = ["app", "main", "state"]
