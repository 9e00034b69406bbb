"""A project's repository: where its code lives and how workstreams name and place it.

One document per project in the project's config bucket (next to the boundary policy),
changed compare-and-set by Weft (admin scope) and read by every agent's Warp at each
claim. The rules here are pure except :func:`check_with_git`, which asks git itself
whether the branch names are valid (``check-ref-format``). See docs/workstreams.md.
"""

from __future__ import annotations

import re
import string
from pathlib import PurePosixPath
from typing import Final, Literal
from urllib.parse import urlsplit

from nats.js.client import JetStreamContext
from pydantic import Field, field_validator, model_validator

from shared.base import LoomModel
from shared.errors import Invalid, NotFound
from shared.git.cli import GitFailed, branch_name_ok, git
from shared.names import ProjectNames
from shared.work.documents import DocumentStore, StoredDocument

REPOSITORY_KEY: Final = "repository"
MAX_GATE_ARGS: Final = 64
MAX_GATE_ARG: Final = 1000
TEMPLATE_FIELDS: Final = ("task_id", "work_id", "short_id", "capability")
UNIQUE_FIELDS: Final = ("work_id", "short_id")
DEFAULT_TEMPLATE: Final = "loom/{task_id}-{short_id}"
DEFAULT_WORKTREE_ROOT: Final = ".loom/worktrees"
URL_MAX: Final = 2000
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$")
_REF_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_plain(value: str, field: str) -> str:
    """No control characters (a NUL cannot even reach git's command line)."""
    if _CONTROL.search(value):
        raise InvalidRepository("must not contain control characters", field=field, rule="format")
    return value


class InvalidRepository(Invalid, ValueError):
    """A repository setting that breaks a rule; a ``ValueError`` too, so the model's
    validators turn it into a field error. The rejected value is never kept: a URL may
    carry a token."""


class RepositoryNotSet(NotFound):
    def __init__(self) -> None:
        super().__init__("this project has no repository (PUT /api/repository sets one)", field="repository")


def check_url(url: str) -> str:
    """A URL agents and landers can reach: an absolute local path, ``file://``, ``ssh://``,
    ``https://`` or ``user@host:path``; never one carrying a password or token (those
    belong in the host's credential helper or SSH agent, not in a shared document)."""
    url = url.strip()
    if not url:
        raise InvalidRepository("must not be empty", field="url", rule="required")
    if len(url) > URL_MAX:
        raise InvalidRepository(f"must be at most {URL_MAX} characters", field="url", rule="max_length")
    if any(c.isspace() for c in url):
        raise InvalidRepository("must not contain whitespace", field="url", rule="format")
    if url.startswith("/"):
        return url
    if "://" not in url:
        if _SCP_LIKE.fullmatch(url):
            return url
        raise InvalidRepository(
            "must be an absolute path, file://, ssh://, https:// or user@host:path",
            field="url",
            rule="scheme",
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("file", "ssh", "https", "http", "git"):
        raise InvalidRepository("scheme must be file, ssh, https, http or git", field="url", rule="scheme")
    if parts.password is not None or (scheme in ("https", "http") and parts.username is not None):
        raise InvalidRepository(
            "must not carry credentials; give them to git on the agents' hosts (a credential "
            "helper or an SSH key)",
            field="url",
            rule="no_credentials",
        )
    if scheme == "file" and not parts.path.startswith("/"):
        raise InvalidRepository("a file:// URL needs an absolute path", field="url", rule="format")
    if scheme != "file" and not parts.hostname:
        raise InvalidRepository("needs a host", field="url", rule="format")
    return url


def check_template(template: str) -> str:
    """Placeholders are the item's fields and one of them makes the name the item's own."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError:
        raise InvalidRepository("has an unbalanced { or }", field="branch_template", rule="format") from None
    unknown = fields - set(TEMPLATE_FIELDS)
    if unknown:
        raise InvalidRepository(
            f"may use only {{{'}, {'.join(TEMPLATE_FIELDS)}}}",
            field="branch_template",
            rule="placeholders",
        )
    if not fields & set(UNIQUE_FIELDS):
        raise InvalidRepository(
            "must include {work_id} or {short_id}, so each item gets a branch of its own",
            field="branch_template",
            rule="unique",
        )
    return template


def check_worktree_root(root: str) -> str:
    """Relative to the agent's project folder (or absolute); never inside a ``.git``."""
    path = PurePosixPath(root)
    if not root.strip():
        raise InvalidRepository("must not be empty", field="worktree_root", rule="required")
    if ".git" in path.parts or any(p.endswith(".git") for p in path.parts):
        raise InvalidRepository(
            "must not be inside a repository's .git folder", field="worktree_root", rule="location"
        )
    if ".." in path.parts:
        raise InvalidRepository("must not climb out with ..", field="worktree_root", rule="location")
    return root


def check_api_url(url: str) -> str:
    """The forge's API: http(s) with a host, never carrying credentials (the token is the
    lander's and Weft's, from their environment)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidRepository("must be an http(s) URL with a host", field="github_api_url", rule="scheme")
    if parts.username is not None or parts.password is not None:
        raise InvalidRepository(
            "must not carry credentials; landers and Weft read the token from their environment",
            field="github_api_url",
            rule="no_credentials",
        )
    return url.strip().rstrip("/")


class RepositorySettings(LoomModel):
    """What an operator sets for a project (``PUT /api/repository``)."""

    url: str = Field(description="Where agents and landers fetch and push: a path, file://, ssh://, https://")
    target_branch: str = Field(default="main", max_length=200, description="The branch work lands on")
    branch_template: str = Field(
        default=DEFAULT_TEMPLATE,
        max_length=200,
        description="An item's branch name: {task_id}, {work_id}, {short_id}, {capability}",
    )
    worktree_root: str = Field(
        default=DEFAULT_WORKTREE_ROOT,
        max_length=1000,
        description="Where worktrees live on an agent's host (relative to its project folder)",
    )
    enabled: bool = Field(
        default=True, description="Workstreams on; an item can still opt out (isolated=false)"
    )
    keep_days: int = Field(
        default=7, ge=0, le=365, description="Days the sweep keeps a final item's worktree"
    )
    gate: list[str] = Field(
        default_factory=list,
        max_length=MAX_GATE_ARGS,
        description="The landing gate: a command as an argument list (never run through a shell), "
        'e.g. ["make", "test"]; empty: no gate (docs/landing.md)',
    )
    gate_timeout_s: int = Field(default=1800, ge=1, le=86_400, description="A gate run longer fails")
    land_batch: int = Field(default=4, ge=1, le=64, description="Items a lander builds and gates together")
    land_mode: Literal["merge", "rebase"] = Field(
        default="merge", description="merge: a merge commit per item; rebase: its commits replayed"
    )
    land_failures: int = Field(
        default=3, ge=1, le=20, description="Conflicts and gate failures before an item goes to the operator"
    )
    delete_landed: bool = Field(default=True, description="Delete a landed item's branch and checkpoints")
    veto: bool = Field(
        default=False,
        description="The coordinator's veto: before landing an item, a lander asks the operator "
        '"land this?" with its diff summary; an item\'s own veto overrides it (docs/landing.md)',
    )
    forge: Literal["git", "github"] = Field(
        default="git",
        description="git: landers push to the target; github: a pull request per item, which GitHub "
        "merges (docs/landing.md, Forge mode)",
    )
    github_repository: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$",
        description="owner/name on GitHub (forge github)",
    )
    github_api_url: str = Field(default="https://api.github.com", max_length=500)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(check_plain(v, "url"))

    @field_validator("target_branch")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_plain(v, "target_branch")

    @field_validator("branch_template")
    @classmethod
    def _template(cls, v: str) -> str:
        return check_template(check_plain(v, "branch_template"))

    @field_validator("gate")
    @classmethod
    def _gate(cls, v: list[str]) -> list[str]:
        if v and not v[0].strip():
            raise InvalidRepository("its first argument must name a program", field="gate", rule="program")
        for arg in v:
            if len(arg) > MAX_GATE_ARG:
                raise InvalidRepository(
                    f"each argument must be at most {MAX_GATE_ARG} characters", field="gate", rule="length"
                )
            check_plain(arg, "gate")
        return v

    @field_validator("github_api_url")
    @classmethod
    def _api(cls, v: str) -> str:
        return check_api_url(check_plain(v, "github_api_url"))

    @model_validator(mode="after")
    def _forge(self) -> RepositorySettings:
        if self.forge == "github" and self.github_repository is None:
            raise InvalidRepository(
                "is required with forge github (owner/name)", field="github_repository", rule="required"
            )
        return self

    @field_validator("worktree_root")
    @classmethod
    def _root(cls, v: str) -> str:
        return check_worktree_root(check_plain(v, "worktree_root"))


class Repository(StoredDocument, RepositorySettings):
    """The stored document: the settings, and when and by whom they were last changed."""


def branch_for(template: str, *, task_id: str, work_id: str, capability: str) -> str:
    """The branch of an item: the template filled in, each value made safe for a ref
    (git's own check then confirms it)."""

    def safe(value: str) -> str:
        cleaned = _REF_UNSAFE.sub("-", value).strip("-./")
        return cleaned.replace("..", ".") or "x"

    return template.format(
        task_id=safe(task_id), work_id=work_id, short_id=work_id[:8], capability=safe(capability)
    )


async def check_with_git(settings: RepositorySettings) -> None:
    """git itself must accept the target branch and a branch the template makes."""
    if not await branch_name_ok(settings.target_branch):
        raise Invalid(
            "is not a valid branch name (git check-ref-format)", field="target_branch", rule="ref_format"
        )
    sample = branch_for(settings.branch_template, task_id="task-1", work_id="0" * 32, capability="code")
    if not await branch_name_ok(sample):
        raise Invalid(
            "makes names that are not valid branch names (git check-ref-format)",
            field="branch_template",
            rule="ref_format",
        )


class RepositoryStore(DocumentStore[RepositorySettings, Repository]):
    """The project's repository document in its config bucket."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        super().__init__(
            js,
            names,
            key=REPOSITORY_KEY,
            doc_type=Repository,
            field="repository",
            stored=lambda settings, by: Repository(**settings.model_dump(), updated_by=by),
        )

    async def put(
        self, settings: RepositorySettings, *, by: str, expected_revision: int | None = None
    ) -> Repository:
        """Set the repository once git accepts its branch names (see DocumentStore.put)."""
        await check_with_git(settings)
        return await super().put(settings, by=by, expected_revision=expected_revision)


class Reach(LoomModel):
    """Whether the repository answered from where it was asked (Weft's host at
    registration: agents' hosts may still differ, so this informs and does not refuse)."""

    reachable: bool
    target_found: bool = False
    problem: str | None = None


async def probe(settings: RepositorySettings, *, timeout: float = 10.0) -> Reach:
    """Ask the repository for its target branch (``git ls-remote``)."""
    target = f"refs/heads/{settings.target_branch}"
    try:
        listing = await git("ls-remote", "--", settings.url, target, timeout=timeout, step="ls-remote")
    except GitFailed as exc:
        return Reach(reachable=False, problem=exc.message)
    found = any(line.endswith(f"\t{target}") for line in listing.stdout.splitlines())
    problem = None if found else f"the target branch {settings.target_branch} does not exist there yet"
    return Reach(reachable=True, target_found=found, problem=problem)
