"""A2A push notifications: a client's webhook is told of every change of its task.

The SDK defines the two halves and this module fills them in the way a fleet needs:

* **Where configurations live** (:class:`PushConfigs`, the SDK's
  ``PushNotificationConfigStore``): the project's bucket ``loom-P-a2a-push``, one key per
  configuration (``<task id>.<hash of its id>``), so every Weft replica sees what a client
  registered through any of them. Each replica reads it from one watched copy
  (``shared/nats/mirror.py``). The bucket keeps a configuration 30 days at most.
* **Who sends** (:class:`PushDispatcher`): every replica pulls the project's work events from
  one durable consumer (:class:`~weft.project.shared_events.SharedEventConsumer`), so each
  event is handled by one replica, and sends the task as it
  is after that event (the SDK's ``BasePushNotificationSender``: JSON of a
  ``StreamResponse`` holding the task, the client's token in ``X-A2A-Notification-Token``,
  its credentials in ``Authorization``). Delivery is best-effort, as the SDK defines it: a
  webhook that fails is logged and not retried; the task itself is always in ``GetTask``.

Webhook URLs must be ``http(s)``; unless ``WEFT_A2A_PUSH_PRIVATE_URLS`` allows them, URLs
whose host resolves to a loopback, private, link-local or otherwise internal address are
refused when registered and again when sent to (the SDK's
``validate_push_notification_url``), so a client cannot make Weft call its own network.

**Per project** (:class:`ProjectPush`): attached to each served project's context
(``weft/project/hub.py``, ``ProjectContext.extensions``) like spin-up; its service starts when
the project is served if the project has webhooks, when a client registers one, or on a sweep
that finds one another replica registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import urllib.parse
from typing import Final

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from a2a.utils.push_url_validator import validate_push_notification_url
from google.protobuf.json_format import MessageToJson, Parse
from nats.js import JetStreamContext

from shared.names import ProjectNames
from shared.nats.jetstream import bucket_exists, ensure_kv
from shared.nats.mirror import BucketMirror
from shared.tasks import raise_if_cancelling
from shared.tls import default_tls
from weft.a2a.errors import field_error
from weft.a2a.mapping import item_of_event, task_of
from weft.project.hub import Attach, ProjectContext, StartedOnUse
from weft.project.shared_events import SharedEventConsumer

log = logging.getLogger("loom.weft.a2a.push")

MAX_CONFIGS_PER_TASK: Final = 10
MAX_URL: Final = 2048
KEEP_S: Final = 30 * 24 * 3600.0
"""How long a configuration is kept (the bucket's TTL): past any task's life."""
SEND_TIMEOUT_S: Final = 10.0
PUSH_EXTENSION: Final = "a2a-push"
"""The name :class:`ProjectPush` is attached under (``ProjectContext.extensions``)."""


def _refused(field: str, rule: str) -> InvalidParamsError:
    return InvalidParamsError(message=f"{field}: {rule}", data=field_error(field, rule))


def config_key(task_id: str, config_id: str) -> str:
    """The bucket key of one configuration (ids chosen by clients need not be key-safe)."""
    return f"{task_id}.{hashlib.sha256(config_id.encode()).hexdigest()[:32]}"


def without_secrets(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """The configuration as it may be shown: the client's token and credentials left out."""
    shown = TaskPushNotificationConfig()
    shown.CopyFrom(config)
    shown.token = ""
    if shown.HasField("authentication"):
        shown.authentication.credentials = ""
    return shown


async def check_url(url: str, *, private_allowed: bool, field: str = "url") -> None:
    """A webhook URL Weft may call: http(s), bounded, and (unless allowed) not internal.
    Refusals name ``field`` and the rule, never the URL."""
    if not url:
        raise _refused(field, "is required")
    if len(url) > MAX_URL:
        raise _refused(field, f"must be at most {MAX_URL} characters")
    try:
        parsed = urllib.parse.urlparse(url)
        host = parsed.hostname
    except ValueError:
        raise _refused(field, "must be an http or https URL") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise _refused(field, "must be an http or https URL")
    if not private_allowed and not await validate_push_notification_url(url):
        raise _refused(
            field,
            "must reach a public address (loopback, private and link-local hosts are refused; "
            "WEFT_A2A_PUSH_PRIVATE_URLS allows them)",
        )


class PushConfigs(PushNotificationConfigStore):
    """The project's push configurations (see the module doc). Bearer tokens are the only
    identities here, so there is one owner: every caller allowed to read the project sees
    its tasks' configurations (without their secrets, :func:`without_secrets`)."""

    def __init__(self, js: JetStreamContext, names: ProjectNames) -> None:
        self._js = js
        self.names = names
        self.mirror: BucketMirror[TaskPushNotificationConfig] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with self._lock:
            if self.mirror is None:
                await ensure_kv(
                    self._js, self.names.a2a_push_bucket, ttl=KEEP_S, description="Loom A2A push configs"
                )
                mirror: BucketMirror[TaskPushNotificationConfig] = BucketMirror(
                    self._js, self.names.a2a_push_bucket, _parse
                )
                await mirror.start()
                self.mirror = mirror

    async def stop(self) -> None:
        if self.mirror is not None:
            await self.mirror.stop()

    def _copy(self) -> BucketMirror[TaskPushNotificationConfig]:
        if self.mirror is None:
            raise RuntimeError("push configurations read before start()")
        return self.mirror

    def configs(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return sorted(self._copy().values(f"{task_id}."), key=lambda c: c.id)

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        stored = normalize_push_notification_config(task_id, notification_config)
        stored.tenant = ""
        key = config_key(task_id, stored.id)
        copy = self._copy()
        if copy.get(key) is None and len(self.configs(task_id)) >= MAX_CONFIGS_PER_TASK:
            raise _refused("id", f"a task has at most {MAX_CONFIGS_PER_TASK} push configurations")
        kv = await self._js.key_value(self.names.a2a_push_bucket)
        revision = await kv.put(key, MessageToJson(stored).encode())
        await copy.wait_for(revision)
        return stored

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        return self.configs(task_id)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return self.configs(task_id)

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        kv = await self._js.key_value(self.names.a2a_push_bucket)
        doomed = [config_id] if config_id is not None else [c.id for c in self.configs(task_id)]
        for one in doomed:
            key = config_key(task_id, one)
            if self._copy().get(key) is not None:
                revision = await kv.delete(key)
                await self._copy().wait_for(revision)


def _parse(_key: str, raw: bytes) -> TaskPushNotificationConfig:
    try:
        return Parse(raw.decode(), TaskPushNotificationConfig())
    except Exception as exc:  # protobuf's ParseError; the mirror skips what it cannot read
        raise ValueError("not a push configuration") from exc


class PushDispatcher:
    """Sends each work event of a task with push configurations to their webhooks (one
    replica per event, see the module doc)."""

    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        configs: PushConfigs,
        *,
        private_allowed: bool,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.names = names
        self.configs = configs
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=SEND_TIMEOUT_S, verify=default_tls())
        self.sender = BasePushNotificationSender(
            self._http,
            configs,
            push_url_validator=None if private_allowed else validate_push_notification_url,
        )
        self._events = SharedEventConsumer(
            js,
            names,
            durable=names.a2a_push_consumer,
            subjects=[names.event_filter("work")],
            handle=self._handle,
            what="A2A push",
        )

    async def start(self) -> None:
        await self._events.start()

    async def stop(self) -> None:
        await self._events.stop()
        if self._own_http:
            with contextlib.suppress(Exception):
                await self._http.aclose()

    async def _handle(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        item = item_of_event(event)
        if item is None or not self.configs.configs(item.id):
            return
        try:
            await self.sender.send_notification(item.id, task_of(item))
        except Exception:  # best-effort (the SDK's own rule): the next event is sent all the same
            raise_if_cancelling()
            log.warning("A2A push for task %s failed", item.id)


class PushService:
    """One project's push notifications: its configurations and their dispatch."""

    def __init__(
        self,
        js: JetStreamContext,
        names: ProjectNames,
        *,
        private_allowed: bool,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.private_allowed = private_allowed
        self.configs = PushConfigs(js, names)
        self.dispatcher = PushDispatcher(js, names, self.configs, private_allowed=private_allowed, http=http)

    async def start(self) -> None:
        await self.configs.start()
        await self.dispatcher.start()

    async def stop(self) -> None:
        await self.dispatcher.stop()
        await self.configs.stop()


class ProjectPush(StartedOnUse["PushService"]):
    """One served project's push notifications, attached to its context: the
    :class:`PushService` is started on first use, so a project without webhooks runs none."""

    def __init__(self, js: JetStreamContext, names: ProjectNames, *, private_allowed: bool) -> None:
        super().__init__()
        self._js = js
        self.names = names
        self.private_allowed = private_allowed

    async def in_use(self) -> bool:
        """Whether an A2A client ever registered a webhook in this project (its bucket exists)."""
        return await bucket_exists(self._js, self.names.a2a_push_bucket)

    def make(self) -> PushService:
        return PushService(self._js, self.names, private_allowed=self.private_allowed)


def push_attach(*, private_allowed: bool) -> Attach:
    """The hook that attaches :class:`ProjectPush` to each project Weft serves
    (``private_allowed``: ``WEFT_A2A_PUSH_PRIVATE_URLS``)."""

    async def attach(project: ProjectContext) -> ProjectPush:
        part = ProjectPush(project.js, project.names, private_allowed=private_allowed)
        await part.start_if_in_use()
        return part

    return attach


def push_of(project: ProjectContext) -> ProjectPush:
    """The project's push part; Weft's app attaches it to every project it serves."""
    part = project.extension(PUSH_EXTENSION, ProjectPush)
    if part is None:
        raise RuntimeError("A2A push is not attached to this project (create_app attaches it)")
    return part
