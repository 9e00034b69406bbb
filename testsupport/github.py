"""A stand-in for GitHub's REST API, just the pull-request calls forge mode makes
(docs/landing.md): open, list open ones by head and base, read one, close one. It speaks GitHub's
shapes and status codes (201, 422 when one is open already, 401 for a bad token, 404 for an
unknown repository), keeps every pull request in memory, and lets a test merge or close one
as a person (or GitHub's merge queue) would. Like a repository's webhook, it then delivers
the ``pull_request`` event, signed with the hook's secret as GitHub signs it, to each hook
a test added (:meth:`GitHubStandIn.deliver`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from shared.signing import signature_of
from testsupport.serving import serve_in_loop


@dataclass
class GitHubStandIn:
    repository: str
    token: str
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    url: str = ""
    hooks: list[tuple[str, str]] = field(default_factory=list)
    """Webhooks: (payload URL, secret)."""

    def merge(self, number: int, sha: str) -> None:
        """Merged on GitHub, into ``sha`` on the base branch."""
        self.pulls[number].update(
            state="closed", merged=True, merge_commit_sha=sha, merged_at="2026-01-01T00:00:00Z"
        )

    def close(self, number: int) -> None:
        """Closed without merging."""
        self.pulls[number].update(state="closed", merged=False)

    async def deliver(self, number: int, *, secret: str | None = None) -> list[httpx.Response]:
        """The ``pull_request`` event of pull request ``number`` as it stands now (``closed``
        once merged or closed), to every hook; ``secret`` signs it instead of the hook's own
        (a delivery Weft must refuse)."""
        pr = self.pulls[number]
        action = "closed" if pr["state"] == "closed" else "opened"
        body = json.dumps(
            {
                "action": action,
                "number": number,
                "pull_request": pr,
                "repository": {"full_name": self.repository},
            }
        ).encode()
        sent: list[httpx.Response] = []
        async with httpx.AsyncClient(timeout=10) as client:
            for url, own in self.hooks:
                headers = {
                    "Content-Type": "application/json",
                    "X-GitHub-Event": "pull_request",
                    "X-GitHub-Delivery": f"delivery-{number}-{len(sent)}",
                    "X-Hub-Signature-256": signature_of(secret or own, body),
                }
                sent.append(await client.post(url, content=body, headers=headers))
        return sent

    def app(self) -> FastAPI:
        app = FastAPI()
        owner = self.repository.split("/")[0]

        def refused(request: Request, owner_: str, name: str) -> JSONResponse | None:
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"message": "Bad credentials"}, status_code=401)
            if f"{owner_}/{name}" != self.repository:
                return JSONResponse({"message": "Not Found"}, status_code=404)
            return None

        @app.post("/repos/{owner_}/{name}/pulls")
        async def open_pull(owner_: str, name: str, request: Request) -> JSONResponse:
            self.calls.append("POST /pulls")
            if (no := refused(request, owner_, name)) is not None:
                return no
            body = await request.json()
            head, base = body.get("head"), body.get("base")
            if not head or not base or not body.get("title"):
                return JSONResponse({"message": "Validation Failed"}, status_code=422)
            for pr in self.pulls.values():
                if pr["head"]["ref"] == head and pr["base"]["ref"] == base and pr["state"] == "open":
                    return JSONResponse(
                        {
                            "message": "Validation Failed",
                            "errors": [{"message": f"A pull request already exists for {owner}:{head}."}],
                        },
                        status_code=422,
                    )
            number = len(self.pulls) + 1
            self.pulls[number] = {
                "number": number,
                "html_url": f"https://github.example/{self.repository}/pull/{number}",
                "state": "open",
                "merged": False,
                "merged_at": None,
                "merge_commit_sha": None,
                "title": body["title"],
                "body": body.get("body", ""),
                "head": {"ref": head},
                "base": {"ref": base},
            }
            return JSONResponse(self.pulls[number], status_code=201)

        @app.get("/repos/{owner_}/{name}/pulls")
        async def list_pulls(owner_: str, name: str, request: Request) -> JSONResponse:
            self.calls.append("GET /pulls")
            if (no := refused(request, owner_, name)) is not None:
                return no
            head = request.query_params.get("head", "")
            base = request.query_params.get("base")
            state = request.query_params.get("state", "open")
            found = [
                pr
                for pr in self.pulls.values()
                if f"{owner}:{pr['head']['ref']}" == head
                and (base is None or pr["base"]["ref"] == base)
                and (state == "all" or pr["state"] == state)
            ]
            return JSONResponse(found)

        @app.get("/repos/{owner_}/{name}/pulls/{number}")
        async def get_pull(owner_: str, name: str, number: int, request: Request) -> JSONResponse:
            self.calls.append(f"GET /pulls/{number}")
            if (no := refused(request, owner_, name)) is not None:
                return no
            if number not in self.pulls:
                return JSONResponse({"message": "Not Found"}, status_code=404)
            return JSONResponse(self.pulls[number])

        @app.patch("/repos/{owner_}/{name}/pulls/{number}")
        async def update_pull(owner_: str, name: str, number: int, request: Request) -> JSONResponse:
            self.calls.append(f"PATCH /pulls/{number}")
            if (no := refused(request, owner_, name)) is not None:
                return no
            if number not in self.pulls:
                return JSONResponse({"message": "Not Found"}, status_code=404)
            state = (await request.json()).get("state")
            if state not in (None, "open", "closed"):
                return JSONResponse({"message": "Validation Failed"}, status_code=422)
            if state is not None and not self.pulls[number]["merged"]:
                self.pulls[number]["state"] = state
            return JSONResponse(self.pulls[number])

        return app


@asynccontextmanager
async def github_stand_in(
    repository: str = "acme/app", token: str = "ghp_standin_token"
) -> AsyncIterator[GitHubStandIn]:
    """A running stand-in, its ``url`` the API base to give Loom."""
    stand_in = GitHubStandIn(repository, token)
    async with serve_in_loop(stand_in.app()) as served:
        stand_in.url = served.url
        yield stand_in
