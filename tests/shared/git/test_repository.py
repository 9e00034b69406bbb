"""A project's repository settings: the rules (pure, and git's own for branch names) and
the document in the project's config bucket (compare-and-set, per project)."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NatsClient
from pydantic import ValidationError

from shared.errors import Conflict, Invalid
from shared.git.repository import RepositorySettings, RepositoryStore, branch_for, check_with_git
from shared.names import ProjectNames
from shared.nats.server import EmbeddedNatsServer

SECRET = "ghp_s3cr3tT0ken"


@pytest.mark.parametrize(
    "url",
    [
        "/srv/git/app.git",
        "file:///srv/git/app.git",
        "ssh://git@example.com/org/app.git",
        "git@example.com:org/app.git",
        "https://example.com/org/app.git",
    ],
)
def test_reachable_urls_are_accepted(url: str) -> None:
    assert RepositorySettings(url=url).url == url


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("", "required"),
        ("relative/path", "scheme"),
        ("ftp://example.com/app.git", "scheme"),
        (f"https://user:{SECRET}@example.com/app.git", "no_credentials"),
        (f"https://{SECRET}@example.com/app.git", "no_credentials"),
        (f"ssh://git:{SECRET}@example.com/app.git", "no_credentials"),
        ("file://relative", "format"),
        ("https:///nohost", "format"),
        ("/srv/with space", "format"),
    ],
)
def test_bad_urls_are_refused_by_field_and_rule_without_the_value(url: str, rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RepositorySettings(url=url)
    error = caught.value.errors(include_input=False)[0]
    assert error["loc"] == ("url",) and error["msg"].startswith("Value error, url: ")
    cause = error["ctx"]["error"]
    assert isinstance(cause, Invalid) and cause.rule == rule and cause.field == "url"
    assert SECRET not in str(caught.value.errors(include_input=False))


@pytest.mark.parametrize(
    ("template", "rule"),
    [
        ("loom/{task_id}", "unique"),
        ("loom/{owner}-{work_id}", "placeholders"),
        ("loom/{work_id", "format"),
    ],
)
def test_branch_templates_must_name_the_item(template: str, rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RepositorySettings(url="/r.git", branch_template=template)
    cause = caught.value.errors()[0]["ctx"]["error"]
    assert cause.field == "branch_template" and cause.rule == rule


@pytest.mark.parametrize("root", ["../elsewhere", "repo/.git/worktrees", "x/y.git/z", " "])
def test_worktree_roots_stay_out_of_git_folders(root: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RepositorySettings(url="/r.git", worktree_root=root)
    assert caught.value.errors()[0]["ctx"]["error"].field == "worktree_root"


def test_branch_names_are_made_safe_from_any_task_id() -> None:
    work_id = "ab" * 16
    assert branch_for(
        "loom/{task_id}-{short_id}", task_id="Fix: login/..x y", work_id=work_id, capability="c"
    ) == ("loom/Fix-login/.x-y-abababab")
    assert (
        branch_for("{capability}/{work_id}", task_id="t", work_id=work_id, capability="code")
        == f"code/{work_id}"
    )


async def test_git_itself_judges_branch_names() -> None:
    await check_with_git(RepositorySettings(url="/r.git", target_branch="release/2.0"))
    for bad in ("main..x", "-main", "a b", "x.lock", "x:y"):
        with pytest.raises(Invalid) as caught:
            await check_with_git(RepositorySettings(url="/r.git", target_branch=bad))
        assert caught.value.field == "target_branch" and caught.value.rule == "ref_format"
    with pytest.raises(Invalid) as template:
        await check_with_git(RepositorySettings(url="/r.git", branch_template="x.lock/{work_id}.lock"))
    assert template.value.field == "branch_template"


async def test_the_document_is_per_project_and_compare_and_set(nats_server: EmbeddedNatsServer) -> None:
    nc = NatsClient()
    await nc.connect(nats_server.url)
    try:
        js = nc.jetstream()
        one, two = (
            RepositoryStore(js, ProjectNames("proj-one")),
            RepositoryStore(js, ProjectNames("proj-two")),
        )
        assert await one.get() is None
        stored = await one.put(RepositorySettings(url="/srv/one.git"), by="admin")
        assert stored.revision > 0 and stored.updated_by == "admin"
        assert (await one.get()) == stored
        assert await two.get() is None  # isolated
        await two.put(RepositorySettings(url="/srv/two.git", target_branch="trunk"), by="admin")
        assert (await one.get()).url == "/srv/one.git"  # type: ignore[union-attr]

        with pytest.raises(Conflict) as stale:
            await one.put(
                RepositorySettings(url="/srv/x.git"), by="admin", expected_revision=stored.revision - 1
            )
        assert stale.value.field == "revision"
        moved = await one.put(
            RepositorySettings(url="/srv/new.git"), by="admin", expected_revision=stored.revision
        )
        assert moved.url == "/srv/new.git" and moved.revision > stored.revision

        # two writers who read the same revision: exactly one wins
        results = await asyncio.gather(
            one.put(RepositorySettings(url="/srv/a.git"), by="a", expected_revision=moved.revision),
            one.put(RepositorySettings(url="/srv/b.git"), by="b", expected_revision=moved.revision),
            return_exceptions=True,
        )
        assert sum(isinstance(r, Conflict) for r in results) == 1
        winner = next(r for r in results if not isinstance(r, BaseException))
        assert (await one.get()).url == winner.url  # type: ignore[union-attr]

        assert await one.delete() is True
        assert await one.get() is None and await one.delete() is False
        assert (await two.get()).target_branch == "trunk"  # type: ignore[union-attr]
    finally:
        await nc.close()


@pytest.mark.parametrize("field", ["url", "target_branch", "branch_template", "worktree_root"])
def test_control_characters_are_refused_in_every_field(field: str) -> None:
    values = {"url": "/srv/app.git", "target_branch": "main", "branch_template": "x/{work_id}"}
    values["worktree_root"] = ".loom/worktrees"
    values[field] = values[field] + "\x00"
    with pytest.raises(ValidationError) as caught:
        RepositorySettings(**values)  # type: ignore[arg-type]
    cause = caught.value.errors()[0]["ctx"]["error"]
    assert (cause.field, cause.rule) == (field, "format")


async def test_git_refuses_what_no_command_line_can_carry_with_its_own_error() -> None:
    from shared.git.cli import GitFailed, git

    with pytest.raises(GitFailed) as caught:
        await git("check-ref-format", "--branch", "a\x00b")
    assert caught.value.step == "check-ref-format" and "\x00" not in caught.value.message
