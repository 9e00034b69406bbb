"""Shuttle with scoped tokens: an admin (or bare) token works; a read token reads, and a change it
may not make ends with Weft's 403 message naming the scope (issue 24)."""

from __future__ import annotations

from shuttle_helpers import Cli
from weft_runner import READ_TOKEN


async def test_a_read_token_lists_but_cannot_register_a_target(cli: Cli) -> None:
    read = {"LOOM_API_TOKEN": READ_TOKEN}
    assert cli("targets", "list", env=read).exit_code == 0
    refused = cli("targets", "add", "laptop", "-m", "local", "--command", "true", "-c", "code", env=read)
    assert refused.exit_code != 0
    assert refused.stderr.strip() == (
        "shuttle: error: scope: this needs a token with the admin scope and the one given has read "
        "(ask whoever runs Weft for one: they add it as admin:<token> in WEFT_API_TOKENS)"
    )
    assert READ_TOKEN not in refused.stderr + refused.stdout
    assert cli.weft.api(cli.project).get("/api/targets").json()["items"] == []  # nothing was written
    # the same command with the admin token goes through
    assert cli("targets", "add", "laptop", "-m", "local", "--command", "true", "-c", "code").exit_code == 0
