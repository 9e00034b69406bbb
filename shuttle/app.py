"""Per-invocation state shared by every command group: the global flags, the
resolved settings and the Weft client, each created only when first needed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from loom.transport import WeftClient
from shuttle.config import Settings, resolve


def command_group(**kwargs: Any) -> typer.Typer:
    """A Typer app whose help is click's plain text: Typer's Rich help costs ~60 ms of
    imports on every ``shuttle`` run (``--help`` goes from ~160 to ~90 ms without it), and
    plain text reads the same in a terminal, a pipe and a log."""
    return typer.Typer(rich_markup_mode=None, **kwargs)


JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one machine-readable JSON document and nothing else.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only ids (or nothing).")]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, max=1000, help="Items per page.")]
CursorOpt = Annotated[str | None, typer.Option("--cursor", help="Resume a listing from its next_cursor.")]
AllOpt = Annotated[bool, typer.Option("--all", help="Follow cursors until the listing is exhausted.")]


@dataclass
class State:
    flags: dict[str, Any] = field(default_factory=dict)
    config_flag: str | None = None
    json: bool = False
    quiet: bool = False
    _settings: Settings | None = None
    _client: WeftClient | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = resolve(self.flags, config_flag=self.config_flag)
        return self._settings

    def client(self) -> WeftClient:
        if self._client is None:
            self._client = WeftClient(self.settings())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def state(ctx: typer.Context) -> State:
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State()
    return root.obj


@dataclass
class Out:
    """How this command prints: the command's own --json/-q or the global ones."""

    json: bool
    quiet: bool


def out(ctx: typer.Context, json_flag: bool = False, quiet_flag: bool = False) -> Out:
    st = state(ctx)
    return Out(json=json_flag or st.json, quiet=quiet_flag or st.quiet)
