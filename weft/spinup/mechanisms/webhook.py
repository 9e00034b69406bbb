"""``webhook``: ask some other system to start an agent with one HTTP call.

The body is a template with ``{work_id}``, ``{target_id}``, ``{target_name}``,
``{agent_id}``, ``{project_id}`` and ``{spinup_id}`` placeholders (default: a
JSON object with all of them). With ``secret_env`` set, the exact body bytes
are signed with HMAC-SHA256 and the hex digest sent as
``<signature_header>: sha256=<hex>`` so the receiver can check the call came
from this Weft. Stopping calls ``stop_url`` when one is configured.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Literal

import httpx
from pydantic import Field, field_validator

from shared.errors import shown_name
from shared.tls import client_tls
from weft.spinup.config import (
    HEADER_NAME,
    SECRET_ENV_NAME,
    SECRET_ENV_RULE,
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
)

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class WebhookConfig(MechanismConfig):
    url: str
    method: HttpMethod = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name -> environment variable holding its value (for Authorization and the like)."""
    body: str | None = None
    """Body template; default: a JSON object with every placeholder."""
    content_type: str = "application/json"
    secret_env: str | None = None
    """Environment variable holding the HMAC-SHA256 key; the body is signed when set."""
    signature_header: str = "X-Loom-Signature"
    success_codes: list[int] = Field(default_factory=lambda: list(range(200, 300)))
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    stop_url: str | None = None
    stop_method: HttpMethod = "POST"
    stop_body: str | None = None
    health_url: str | None = None
    health_method: Literal["GET", "HEAD", "POST"] = "GET"

    @field_validator("url", "stop_url", "health_url")
    @classmethod
    def _urls(cls, v: str | None) -> str | None:
        if v is not None:
            check_placeholders(v)
        return http_url(v)

    @field_validator("headers", "headers_env")
    @classmethod
    def _header_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if HEADER_NAME.fullmatch(key) is None:
                raise ValueError(f"key {shown_name(key)} is not a valid header name")
            if "\n" in value or "\r" in value:
                raise ValueError(f"header {shown_name(key)}: header values must be one line")
        return v

    @field_validator("headers")
    @classmethod
    def _no_secret_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if key.lower() in ("authorization", "proxy-authorization", "x-api-key", "cookie"):
                raise ValueError(
                    f"header {shown_name(key)} carries a secret; name an environment variable in headers_env"
                )
            check_placeholders(value, key)
        return v

    @field_validator("headers_env")
    @classmethod
    def _header_envs(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if SECRET_ENV_NAME.fullmatch(value) is None:
                raise ValueError(f"header {shown_name(key)}: {SECRET_ENV_RULE}")
        return v

    @field_validator("body", "stop_body")
    @classmethod
    def _body(cls, v: str | None) -> str | None:
        if v is not None:
            check_placeholders(v)
        return v

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: str | None) -> str | None:
        return secret_env_name(v)

    @field_validator("signature_header")
    @classmethod
    def _sig(cls, v: str) -> str:
        if HEADER_NAME.fullmatch(v) is None:
            raise ValueError("must be a valid header name")
        return v

    @field_validator("success_codes")
    @classmethod
    def _codes(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("must list at least one status code")
        for code in v:
            if not 100 <= code <= 599:
                raise ValueError("every code must be an HTTP status code (100 to 599)")
        return sorted(set(v))


TEMPLATE_KEYS = ("work_id", "target_id", "target_name", "agent_id", "project_id", "spinup_id")


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _render(template: str, values: dict[str, str]) -> str:
    out = template
    for key in TEMPLATE_KEYS:
        out = out.replace("{" + key + "}", values.get(key, ""))
    return out


class WebhookMechanism(Mechanism):
    name = "webhook"
    config_model = WebhookConfig

    def _prepare(self, config: WebhookConfig, values: dict[str, str], body: bytes) -> dict[str, str]:
        headers = {key: _render(value, values) for key, value in config.headers.items()}
        for header, variable in config.headers_env.items():
            headers[header] = secret_from_env(variable, f"headers_env.{header}")
        headers.setdefault("Content-Type", config.content_type)
        headers.setdefault("User-Agent", "loom-weft")
        if config.secret_env:
            headers[config.signature_header] = sign(secret_from_env(config.secret_env, "secret_env"), body)
        return headers

    async def _send(
        self,
        config: WebhookConfig,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: float,
    ) -> httpx.Response:
        try:
            async with httpx.AsyncClient(timeout=timeout, verify=client_tls(url)) as client:
                return await client.request(method, url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise MechanismError(f"webhook {method} {url}: {type(exc).__name__}: {exc}") from None

    async def start(self, config: Any, launch: Launch, on_handle: HandleCallback) -> dict[str, str]:
        assert isinstance(config, WebhookConfig)
        values = launch.template_values()
        if config.body is not None:
            text = _render(config.body, values)
        else:  # the default body: every value, and the agent's credentials (never in the handle)
            sent = dict(values) | ({"nats_creds": launch.nats_creds} if launch.nats_creds else {})
            text = json.dumps(sent, sort_keys=True)
        body = text.encode()
        url = _render(config.url, values)
        response = await self._send(
            config, config.method, url, body, self._prepare(config, values, body), config.timeout_s
        )
        if response.status_code not in config.success_codes:
            raise MechanismError(
                f"webhook {config.method} {url} answered {response.status_code}, not one of the success codes"
                + (f": {response.text[:200]}" if response.text else "")
            )
        handle = dict(values)
        handle["status"] = str(response.status_code)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("id"), str | int):
            handle["remote_id"] = str(answer["id"])
        await on_handle(handle)
        return handle

    async def stop(self, config: Any, handle: dict[str, str]) -> str:
        assert isinstance(config, WebhookConfig)
        if not config.stop_url:
            return "no stop_url configured; the agent is expected to exit after its shutdown request"
        values = {key: handle.get(key, "") for key in TEMPLATE_KEYS}
        if config.stop_body is not None:
            text = _render(config.stop_body, values)
        else:
            payload: dict[str, str] = dict(values, action="stop")
            if handle.get("remote_id"):
                payload["remote_id"] = handle["remote_id"]
            text = json.dumps(payload, sort_keys=True)
        body = text.encode()
        url = _render(config.stop_url, values)
        response = await self._send(
            config, config.stop_method, url, body, self._prepare(config, values, body), config.timeout_s
        )
        if response.status_code not in config.success_codes and response.status_code != 404:
            raise MechanismError(f"webhook stop {config.stop_method} {url} answered {response.status_code}")
        return f"stop webhook answered {response.status_code}"

    async def probe(self, config: Any, timeout_s: float) -> ProbeResult:
        assert isinstance(config, WebhookConfig)
        watch = Stopwatch()
        if not config.health_url:
            return ProbeResult(True, "no health_url configured; configuration is valid", watch.ms)
        try:
            headers = {h: secret_from_env(v, f"headers_env.{h}") for h, v in config.headers_env.items()}
            response = await self._send(
                config, config.health_method, config.health_url, None, headers, timeout_s
            )
        except MechanismError as exc:
            return ProbeResult(False, str(exc), watch.ms)
        if response.status_code >= 400:
            return ProbeResult(False, f"health_url answered {response.status_code}", watch.ms)
        return ProbeResult(True, f"health_url answered {response.status_code}", watch.ms)
