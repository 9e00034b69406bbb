"""``github-actions``: dispatch a workflow that runs an agent, then find *its* run.

GitHub's dispatch call returns no run id, and "the latest run" may belong to
someone else, so every dispatch carries a correlation id (the spin-up id) as
an input, the workflow's ``run-name`` includes it, and the run is found by
listing ``workflow_dispatch`` runs created since the dispatch and matching
that id in the run's name. Stopping cancels exactly that run. The token comes
from the environment variable named by ``token_env`` and is never logged.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import httpx
from pydantic import Field, field_validator

from shared.errors import shown_name
from shared.models import utcnow
from shared.tls import client_tls
from weft.spinup.config import (
    MechanismConfig,
    check_placeholders,
    http_url,
    secret_env_name,
)
from weft.spinup.mechanisms.base import (
    HandleCallback,
    Launch,
    Mechanism,
    MechanismError,
    ProbeResult,
    Stopwatch,
    secret_from_env,
    url_has_credentials,
)


class GithubActionsConfig(MechanismConfig):
    repository: str
    """``owner/repo``."""
    workflow: str
    """Workflow file name (``agent.yml``) or numeric id."""
    ref: str = "main"
    token_env: str = "GITHUB_TOKEN"
    api_url: str = "https://api.github.com"
    correlation_input: str = "correlation_id"
    """The workflow input that carries the spin-up id; the workflow's ``run-name`` must include it."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Extra workflow inputs; values may use the placeholders {work_id}, {agent_id}, ..."""
    pass_loom_inputs: bool = True
    """Also send ``agent_id``, ``project_id``, ``target_id``, ``work_id`` and ``nats_url`` inputs."""
    run_lookup_timeout_s: float = Field(default=60.0, gt=0, le=900)
    run_lookup_interval_s: float = Field(default=2.0, gt=0, le=60)
    timeout_s: float = Field(default=15.0, gt=0, le=300)

    @field_validator("repository")
    @classmethod
    def _repo(cls, v: str) -> str:
        if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}", v) is None:
            raise ValueError("must be 'owner/repo'")
        return v

    @field_validator("workflow")
    @classmethod
    def _workflow(cls, v: str) -> str:
        if not (v.isdigit() or re.fullmatch(r"[A-Za-z0-9_.-]+\.ya?ml", v)):
            raise ValueError("must be a workflow file name ending in .yml/.yaml, or a numeric workflow id")
        return v

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not v or any(c.isspace() for c in v) or ".." in v:
            raise ValueError("must be a branch or tag name")
        return v

    @field_validator("token_env")
    @classmethod
    def _token_env(cls, v: str) -> str:
        result = secret_env_name(v)
        assert result is not None
        return result

    @field_validator("api_url")
    @classmethod
    def _api(cls, v: str) -> str:
        result = http_url(v, required=True)
        assert result is not None
        return result

    @field_validator("correlation_input")
    @classmethod
    def _input_name(cls, v: str) -> str:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,99}", v) is None:
            raise ValueError("must be a workflow input name")
        return v

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,99}", key) is None:
                raise ValueError(f"key {shown_name(key)} is not a workflow input name")
            check_placeholders(value, key)
        return v


CLOCK_SKEW = timedelta(minutes=2)
"""Runs are searched from a little before the dispatch: our clock and GitHub's differ."""


def dispatch_inputs(config: GithubActionsConfig, launch: Launch) -> dict[str, str]:
    inputs = {key: launch.render(value) for key, value in config.inputs.items()}
    if config.pass_loom_inputs:
        inputs.update(
            {
                "agent_id": launch.agent_id,
                "project_id": launch.project_id,
                "target_id": launch.target_id,
                "work_id": launch.work_id or "",
            }
        )
        if not url_has_credentials(launch.nats_url):
            inputs["nats_url"] = launch.nats_url
        if launch.nats_creds is not None:  # the run's own credentials, revoked when it ends
            inputs["nats_creds"] = launch.nats_creds
    inputs[config.correlation_input] = launch.spinup_id
    return inputs


def run_matches(run: dict[str, Any], correlation_id: str) -> bool:
    return any(correlation_id in str(run.get(key) or "") for key in ("name", "display_title"))


class GithubActionsMechanism(Mechanism):
    name = "github-actions"
    config_model = GithubActionsConfig

    def _client(self, config: GithubActionsConfig, timeout: float | None = None) -> httpx.AsyncClient:
        token = secret_from_env(config.token_env, "token_env")
        return httpx.AsyncClient(
            base_url=config.api_url,
            verify=client_tls(config.api_url),
            timeout=timeout or config.timeout_s,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "loom-weft",
            },
        )

    @staticmethod
    async def _call(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise MechanismError(f"GitHub API {client.base_url}: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _problem(response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return response.text[:200]
        return str(body.get("message", ""))[:300] if isinstance(body, dict) else ""

    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        assert isinstance(config, GithubActionsConfig)
        dispatched_at = utcnow()
        handle = {
            "repository": config.repository,
            "workflow": config.workflow,
            "correlation_id": launch.spinup_id,
            "dispatched_at": dispatched_at.isoformat(),
        }
        async with self._client(config) as client:
            response = await self._call(
                client,
                "POST",
                f"/repos/{config.repository}/actions/workflows/{config.workflow}/dispatches",
                json={"ref": config.ref, "inputs": dispatch_inputs(config, launch)},
            )
            if response.status_code not in (200, 201, 204):
                raise MechanismError(
                    f"GitHub refused the workflow dispatch ({response.status_code}): "
                    f"{self._problem(response)}"
                )
            await on_handle(handle)
            run = await self._find_run(client, config, launch.spinup_id, dispatched_at)
        handle.update({"run_id": str(run["id"]), "run_url": str(run.get("html_url", ""))})
        await on_handle(handle)
        return handle

    async def _find_run(
        self,
        client: httpx.AsyncClient,
        config: GithubActionsConfig,
        correlation_id: str,
        dispatched_at: Any,
        *,
        deadline_s: float | None = None,
    ) -> dict[str, Any]:
        since = (dispatched_at - CLOCK_SKEW).strftime("%Y-%m-%dT%H:%M:%SZ")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (config.run_lookup_timeout_s if deadline_s is None else deadline_s)
        path = f"/repos/{config.repository}/actions/workflows/{config.workflow}/runs"
        params = {"event": "workflow_dispatch", "created": f">={since}", "per_page": "100"}
        while True:
            response = await self._call(client, "GET", path, params=params)
            if response.status_code != 200:
                raise MechanismError(
                    f"GitHub refused to list workflow runs ({response.status_code}): "
                    f"{self._problem(response)}"
                )
            for run in response.json().get("workflow_runs", []):
                if run_matches(run, correlation_id):
                    return dict(run)
            if loop.time() >= deadline:
                raise MechanismError(
                    f"the workflow was dispatched but no run carrying correlation id {correlation_id} "
                    f"appeared within {config.run_lookup_timeout_s:g}s; the workflow's run-name must include "
                    f"${{{{ inputs.{config.correlation_input} }}}}"
                )
            await asyncio.sleep(config.run_lookup_interval_s)

    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        assert isinstance(config, GithubActionsConfig)
        async with self._client(config) as client:
            run_id = handle.get("run_id")
            if not run_id:
                from datetime import datetime

                try:
                    run = await self._find_run(
                        client,
                        config,
                        handle["correlation_id"],
                        datetime.fromisoformat(handle["dispatched_at"]),
                        deadline_s=0,
                    )
                except MechanismError:
                    return "no run carrying this spin-up's correlation id was found; nothing to cancel"
                run_id = str(run["id"])
            response = await self._call(
                client, "POST", f"/repos/{config.repository}/actions/runs/{run_id}/cancel"
            )
        if response.status_code in (200, 202):
            return f"workflow run {run_id} cancelled"
        if response.status_code == 409:
            return f"workflow run {run_id} had already finished"
        if response.status_code == 404:
            return f"workflow run {run_id} no longer exists"
        raise MechanismError(
            f"GitHub refused to cancel run {run_id} ({response.status_code}): {self._problem(response)}"
        )

    async def alive(self, config: Any, handle: dict[str, str]) -> bool | None:
        assert isinstance(config, GithubActionsConfig)
        if not handle.get("run_id"):
            return None
        try:
            async with self._client(config) as client:
                response = await self._call(
                    client, "GET", f"/repos/{config.repository}/actions/runs/{handle['run_id']}"
                )
        except MechanismError:
            return None
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            return None
        return bool(response.json().get("status") != "completed")

    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        assert isinstance(config, GithubActionsConfig)
        watch = Stopwatch()
        try:
            async with self._client(config, timeout_s) as client:
                workflow = await self._call(
                    client, "GET", f"/repos/{config.repository}/actions/workflows/{config.workflow}"
                )
                if workflow.status_code != 200:
                    return ProbeResult(
                        False,
                        f"workflow {config.workflow} not found in {config.repository} "
                        f"({workflow.status_code})",
                        watch.ms,
                    )
                state = workflow.json().get("state", "active")
                if state != "active":
                    return ProbeResult(False, f"workflow {config.workflow} is {state}", watch.ms)
                repo = await self._call(client, "GET", f"/repos/{config.repository}")
        except MechanismError as exc:
            return ProbeResult(False, str(exc), watch.ms)
        permissions = repo.json().get("permissions", {}) if repo.status_code == 200 else {}
        if not (permissions.get("push") or permissions.get("admin") or permissions.get("maintain")):
            return ProbeResult(
                False,
                f"the token in {config.token_env} cannot dispatch workflows of {config.repository}",
                watch.ms,
            )
        return ProbeResult(
            True, f"workflow {config.workflow} of {config.repository} can be dispatched", watch.ms
        )
