"""``shuttle notify list|set|remove|test``: where the project's notifications go
(docs/operator.md, Notifications). A sink's URL and secret are sent, never shown."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from loom.transport import seg
from shuttle.app import JsonOpt, QuietOpt, command_group, out, state
from shuttle.errors import UsageError
from shuttle.output import ago, emit_json, escape, say, table

app = command_group(
    help="Notification sinks: Slack, ntfy, e-mail, webhooks (through Apprise) or a signed webhook."
)

KINDS = ("question", "reminder", "dead-letter", "landing", "target", "bottleneck", "silence", "budget")


def _health(status: dict[str, Any]) -> str:
    if status.get("failing_since"):
        return f"failing since {ago(status['failing_since'])}: {status.get('last_error') or ''}"
    return f"ok ({status.get('sent', 0)} sent)" if status.get("sent") else "nothing sent yet"


@app.command("list")
def list_cmd(ctx: typer.Context, json_out: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """The sinks (their scheme only, never a URL) and how their deliveries went."""
    o = out(ctx, json_out, quiet)
    body = state(ctx).client().get("/api/notify/sinks")
    if o.json:
        emit_json(body)
        return
    if o.quiet:
        for sink in body["items"]:
            typer.echo(sink["name"])
        return
    table(
        "notification sinks",
        ["name", "kind", "floor", "events", "rate/min", "enabled", "deliveries"],
        [
            (
                escape(s["name"]),
                escape(f"{s['kind']} ({s['scheme']})"),
                escape(s["min_priority"]),
                escape(", ".join(s["events"]) if s["events"] else "all"),
                str(s["rate_per_minute"]),
                "yes" if s["enabled"] else "no",
                escape(_health(s.get("status") or {})),
            )
            for s in body["items"]
        ],
        empty="no notification sinks (shuttle notify set NAME URL)",
    )


@app.command("set")
def set_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The sink's name.", show_default=False)],
    url: Annotated[
        str,
        typer.Argument(
            help="An Apprise URL (json://, ntfy://, slack://, mailto://, ...) or, with --webhook, an "
            "http(s) URL; - reads it from stdin (keeps it out of your shell's history).",
            show_default=False,
        ),
    ],
    webhook: Annotated[
        bool, typer.Option("--webhook", help="Loom's own signed webhook (needs --secret).")
    ] = False,
    secret: Annotated[
        str | None, typer.Option("--secret", help="--webhook: the HMAC key (16+ characters); - reads stdin.")
    ] = None,
    floor: Annotated[
        str, typer.Option("--floor", help="Notices of this priority or more urgent: P0-P3.")
    ] = "P1",
    events: Annotated[
        list[str] | None,
        typer.Option(
            "--event", help="question, reminder, dead-letter, landing or target (repeat; default: all)."
        ),
    ] = None,
    rate: Annotated[
        int, typer.Option("--rate", min=1, max=6000, help="At most this many sends a minute.")
    ] = 30,
    disabled: Annotated[bool, typer.Option("--disabled", help="Store it without sending to it.")] = False,
    test: Annotated[bool, typer.Option("--test", help="Send a test notice once it is set.")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Create or replace a sink (admin); its URL and secret are never shown again."""
    o = out(ctx, json_out, quiet)
    if url == "-" and secret == "-":
        raise UsageError("read the URL or the secret from stdin, not both")
    body: dict[str, Any] = {
        "kind": "webhook" if webhook else "apprise",
        "url": sys.stdin.readline().strip() if url == "-" else url,
        "min_priority": floor,
        "rate_per_minute": rate,
        "enabled": not disabled,
    }
    if secret is not None:
        body["secret"] = sys.stdin.readline().strip() if secret == "-" else secret
    if events:
        unknown = [e for e in events if e not in KINDS]
        if unknown:
            raise UsageError(f"--event: must be one of {', '.join(KINDS)}")
        body["events"] = events
    client = state(ctx).client()
    stored = client.put(f"/api/notify/sinks/{seg(name)}", body)
    tried = client.post(f"/api/notify/sinks/{seg(name)}/test", {}) if test else None
    if o.json:
        emit_json({"sink": stored, "test": tried})
        return
    say(
        f"sink {escape(stored['name'])} set ({escape(stored['kind'])}, {escape(stored['scheme'])})",
        quiet=o.quiet,
    )
    if tried is not None:
        said = (
            "a test notice was delivered"
            if tried["delivered"]
            else f"the test notice failed: {tried['error']}"
        )
        say(escape(said), quiet=o.quiet and tried["delivered"])


@app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The sink's name.", show_default=False)],
    quiet: QuietOpt = False,
) -> None:
    """Remove a sink (admin)."""
    state(ctx).client().delete(f"/api/notify/sinks/{seg(name)}")
    say(f"sink {escape(name)} removed", quiet=out(ctx, False, quiet).quiet)


@app.command("test")
def test_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The sink's name.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """Send a test notice to one sink now (admin); exits 1 when it was not delivered."""
    o = out(ctx, json_out)
    tried = state(ctx).client().post(f"/api/notify/sinks/{seg(name)}/test", {})
    if o.json:
        emit_json(tried)
    elif tried["delivered"]:
        say(f"a test notice reached {escape(name)}")
    else:
        say(f"the test notice to {escape(name)} failed: {escape(tried['error'])}")
    if not tried["delivered"]:
        raise typer.Exit(1)
