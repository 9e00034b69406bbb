"""Forge mode's GitHub client (shared/git/forge.py) against a stand-in server speaking
GitHub's REST API (testsupport/github.py): open a pull request, find the one already open,
read one; a bad token, an unknown repository, an unreachable API and no token each a clear
error naming the setting, never the token."""

from __future__ import annotations

import pytest

from shared.errors import Invalid
from shared.git.forge import ForgeError, GitHub, closed_pull_request
from shared.signing import signature_of, signed
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
        with pytest.raises(ForgeError) as unknown:
            await GitHub(gh.url, "acme/app", TOKEN).close_pull_request(42)
        assert unknown.value.field == "pull_request" and "#42" in str(unknown.value)


async def test_a_pull_request_is_closed_unmerged_and_a_webhook_delivery_is_read_only_when_signed() -> None:
    async with github_stand_in("acme/app", TOKEN) as gh:
        client = GitHub(gh.url, "acme/app", TOKEN)
        made = await client.open_pull_request("loom/fix-2", "main", "fix", "body")
        closed = await client.close_pull_request(made.number)
        assert (closed.state, closed.merged) == ("closed", False)

    body = b'{"action": "closed", "repository": {"full_name": "acme/app"}, "pull_request": {"number": 7}}'
    assert signed("s3cret", body, signature_of("s3cret", body))
    assert not signed("s3cret", body, signature_of("other", body)) and not signed("s3cret", body, None)
    assert not signed("s3cret", body + b" ", signature_of("s3cret", body))
    heard = closed_pull_request("pull_request", body)
    assert heard is not None and heard[0] == "acme/app" and heard[1].number == 7
    assert closed_pull_request("ping", b"{}") is None
    assert closed_pull_request("pull_request", body.replace(b"closed", b"opened")) is None
    for broken, field in (
        (b"not json", "body"),
        (b"[1]", "body"),
        (b'{"action": "closed", "pull_request": {"number": 7}}', "repository.full_name"),
        (
            b'{"action": "closed", "repository": {"full_name": "a/b"}, "pull_request": {}}',
            "pull_request.number",
        ),
    ):
        with pytest.raises(Invalid) as refused:
            closed_pull_request("pull_request", broken)
        assert refused.value.field == field
