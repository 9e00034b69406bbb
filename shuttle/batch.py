"""Weft's batch answers (``{"results": [{id, ok, status, error}], "succeeded", "failed"}``):
one line per id, and exit 1 when any was refused."""

from __future__ import annotations

from typing import Any

import typer

from shuttle.app import Out
from shuttle.errors import Refused
from shuttle.output import emit_json, escape, say, styled


def report(result: Any, o: Out, verb: str) -> None:
    results = result.get("results", []) if isinstance(result, dict) else []
    if o.json:
        emit_json(result)
    for entry in results:
        if o.json:
            break
        if entry.get("ok"):
            if o.quiet:
                typer.echo(entry.get("id", ""))
            else:
                say(f"{escape(entry.get('id', ''))} {verb} ({styled(entry.get('status'))})")
        else:
            error = entry.get("error") or {}
            typer.echo(f"shuttle: {entry.get('id', '')}: {error.get('message', 'refused')}", err=True)
    failed = [e for e in results if not e.get("ok")]
    if failed:
        raise Refused(f"{len(failed)} of {len(results)} refused", status=200, code="partial", details=failed)
