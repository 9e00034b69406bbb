"""Forge mode (docs/landing.md): the last step of a landing handed to GitHub's pull requests.

A lander opens (or finds) one pull request per item, head the item's branch, base the
target; GitHub's checks, reviews and merge queue decide; Weft watches the pull request and
completes the item when GitHub reports it merged, or sends it back when it is closed
without merging (and closes it when the item is cancelled). This module is the one client
of GitHub's REST API Loom has: four calls,
through httpx, with the token of the process that uses it (a lander's or Weft's
environment; never stored, never in a message); and it reads what GitHub's webhook says
of a pull request (``pull_request`` events, signed with the hook's secret), so Weft hears
of a merge at once rather than at its next poll.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx

from shared.base import LoomModel
from shared.errors import Conflict, Invalid
from shared.redact import redact
from shared.tls import client_tls

API_VERSION: Final = "2022-11-28"
TIMEOUT_S: Final = 20.0


class ForgeError(Conflict):
    """GitHub refused or could not be reached; the message says which, never the token."""

    code = "forge_failed"


class PullRequest(LoomModel):
    number: int
    url: str
    state: str
    merged: bool = False
    merge_commit_sha: str | None = None
    head: str
    base: str

    @classmethod
    def of(cls, doc: dict[str, Any]) -> PullRequest:
        return cls(
            number=int(doc["number"]),
            url=str(doc.get("html_url") or ""),
            state=str(doc.get("state") or ""),
            merged=bool(doc.get("merged") or doc.get("merged_at")),
            merge_commit_sha=doc.get("merge_commit_sha"),
            head=str((doc.get("head") or {}).get("ref") or ""),
            base=str((doc.get("base") or {}).get("ref") or ""),
        )


class GitHub:
    """Pull requests of one repository (``owner/name``) through GitHub's REST API."""

    def __init__(self, api_url: str, repository: str, token: str | None) -> None:
        self.repository = repository
        self.owner = repository.split("/", 1)[0]
        self._base = f"{api_url.rstrip('/')}/repos/{repository}"
        self._token = token

    def _client(self) -> httpx.AsyncClient:
        if not self._token:
            raise ForgeError("no GitHub token on this host (LOOM_GITHUB_TOKEN)", field="github_token")
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
        }
        return httpx.AsyncClient(headers=headers, timeout=TIMEOUT_S, verify=client_tls(self._base))

    async def _call(self, method: str, path: str, **options: Any) -> httpx.Response:
        try:
            async with self._client() as client:
                response = await client.request(method, f"{self._base}{path}", **options)
        except httpx.HTTPError as exc:
            raise ForgeError(
                f"GitHub cannot be reached: {type(exc).__name__}", field="github_api_url"
            ) from None
        if response.status_code in (401, 403):
            raise ForgeError(
                f"GitHub refused the token ({response.status_code}): it needs pull-request access to "
                f"{self.repository}",
                field="github_token",
            )
        return response

    def _no_repository(self) -> ForgeError:
        return ForgeError(
            f"GitHub has no repository {self.repository} (or the token cannot see it)",
            field="github_repository",
        )

    async def open_pull_request(self, head: str, base: str, title: str, body: str) -> PullRequest:
        """The open pull request from ``head`` to ``base``: made now, or the one already open."""
        made = await self._call(
            "POST", "/pulls", json={"title": title, "head": head, "base": base, "body": body}
        )
        if made.status_code == 201:
            return PullRequest.of(made.json())
        if made.status_code == 404:
            raise self._no_repository()
        if made.status_code == 422:  # one is open already (or the branch is unknown to GitHub)
            existing = await self.find_open(head, base)
            if existing is not None:
                return existing
        raise ForgeError(f"GitHub did not open the pull request: {_said(made)}", field="pull_request")

    async def find_open(self, head: str, base: str) -> PullRequest | None:
        listed = await self._call(
            "GET", "/pulls", params={"head": f"{self.owner}:{head}", "base": base, "state": "open"}
        )
        if listed.status_code == 404:
            raise self._no_repository()
        if listed.status_code != 200:
            raise ForgeError(f"GitHub did not list pull requests: {_said(listed)}", field="pull_request")
        found = [PullRequest.of(doc) for doc in listed.json()]
        return found[0] if found else None

    async def pull_request(self, number: int) -> PullRequest:
        return await self._pull("GET", number, "answer for")

    async def close_pull_request(self, number: int) -> PullRequest:
        """Close pull request ``number`` without merging it (its item was cancelled)."""
        return await self._pull("PATCH", number, "close", json={"state": "closed"})

    async def _pull(self, method: str, number: int, doing: str, **options: Any) -> PullRequest:
        """One call on pull request ``number``: what GitHub says of it after."""
        answer = await self._call(method, f"/pulls/{number}", **options)
        if answer.status_code == 404:
            raise ForgeError(
                f"GitHub has no pull request #{number} in {self.repository}", field="pull_request"
            )
        if answer.status_code != 200:
            raise ForgeError(
                f"GitHub did not {doing} pull request #{number}: {_said(answer)}", field="pull_request"
            )
        return PullRequest.of(answer.json())


def _said(response: httpx.Response) -> str:
    """GitHub's own message (status and its ``message``), redacted, one line."""
    try:
        message = str(response.json().get("message") or "")
    except ValueError:
        message = ""
    return redact(f"{response.status_code} {message}".strip())[:300]


# -- GitHub's webhook ------------------------------------------------------------------------

SIGNATURE_HEADER: Final = "X-Hub-Signature-256"
EVENT_HEADER: Final = "X-GitHub-Event"


def closed_pull_request(event: str, body: bytes) -> tuple[str, PullRequest] | None:
    """What a webhook delivery says that matters to Loom: the repository (``owner/name``)
    and the pull request of a ``pull_request`` event whose action is ``closed`` (merged or
    not); None for any other event or action (``ping`` included). :class:`Invalid` naming
    the field when such an event lacks what it must hold."""
    if event != "pull_request":
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        raise Invalid("must be the JSON GitHub sends", field="body", rule="json") from None
    if not isinstance(doc, dict):
        raise Invalid("must be a JSON object", field="body", rule="json")
    if doc.get("action") != "closed":
        return None
    repository = doc.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    if not isinstance(name, str) or not name:
        raise Invalid("is required (owner/name)", field="repository.full_name", rule="required")
    pr = doc.get("pull_request")
    if not isinstance(pr, dict) or not isinstance(pr.get("number"), int):
        raise Invalid("is required (an integer)", field="pull_request.number", rule="required")
    return name, PullRequest.of(pr)
