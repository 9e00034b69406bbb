"""Forge mode's GitHub client (shared/git/forge.py) against a stand-in server speaking
GitHub's REST API (testsupport/github.py): open a pull request, find the one already open,
read one; a bad token, an unknown repository, an unreachable API and no token each a clear
error naming the setting, never the token."""

from __future__ import annotations

import pytest

from shared.git.forge import ForgeError, GitHub
from testsupport.github import github_stand_in

TOKEN = "ghp_standin_token"


async def test_a_pull_request_is_opened_once_and_read_back() -> None:
    async with github_stand_in("acme/app", TOKEN) as gh:
        client = GitHub(gh.url, "acme/app", TOKEN)
        made = await client.open_pull_request("loom/fix-1", "main", "fix: login", "body")
        assert (made.number, made.state, made.head, made.base) == (1, "open", "loom/fix-1", "main")
        assert made.url.endswith("/acme/app/pull/1")
        again = await client.open_pull_request("loom/fix-1", "main", "fix: login", "body")
        assert again.number == 1 and len(gh.pulls) == 1  # the open one, not a second
        gh.merge(1, "a" * 40)
        read = await client.pull_request(1)
        assert (read.merged, read.merge_commit_sha, read.state) == (True, "a" * 40, "closed")
        assert await client.find_open("loom/fix-1", "main") is None


async def test_refusals_name_the_setting_and_never_the_token() -> None:
    async with github_stand_in("acme/app", TOKEN) as gh:
        wrong = "ghp_wrong_secret_value"
        cases = [
            (GitHub(gh.url, "acme/app", wrong), "github_token"),
            (GitHub(gh.url, "acme/other", TOKEN), "github_repository"),
            (GitHub(gh.url, "acme/app", None), "github_token"),
            (GitHub("http://127.0.0.1:9", "acme/app", TOKEN), "github_api_url"),
        ]
        for client, field in cases:
            with pytest.raises(ForgeError) as refused:
                await client.open_pull_request("loom/x", "main", "t", "b")
            assert refused.value.field == field
            assert wrong not in str(refused.value) and TOKEN not in str(refused.value)
        with pytest.raises(ForgeError) as missing:
            await GitHub(gh.url, "acme/app", TOKEN).pull_request(42)
        assert missing.value.field == "pull_request" and "#42" in str(missing.value)
