"""A live fabric for the documentation's examples: the real ``weft serve`` (with its bundled
nats-server) on free ports over a temporary home, and the environment the examples'
commands run in (the substitutions are listed in test_doc_examples.py's docstring)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shared.nats.server import free_port
from shared.tls import client_tls
from testsupport.env import without_fabric
from testsupport.zygote import zygote_env
from weft.demo import serve_in_background, stop_process, wait_healthy

BIN = Path(sys.executable).parent
"""The console scripts of the Python running the tests: what ``.venv/bin/`` names."""
REPO = Path(__file__).resolve().parents[2]
DOC_API_URL = "http://127.0.0.1:8080"
DOC_NATS_PORT = 4222


def base_environment(home: Path) -> dict[str, str]:
    """The caller's environment without Loom's, NATS's and Weft's settings, with its own HOME
    (so ``~/.loom`` and ``~/.local/share/loom`` are fresh) and this Python's scripts first on
    PATH."""
    env = {k: v for k, v in without_fabric().items() if k not in ("XDG_CONFIG_HOME", "NO_COLOR", "COLUMNS")}
    env["HOME"] = str(home)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}"
    return env | zygote_env()  # a Warp started from it is forked (testsupport/zygote.py)


@dataclass
class Fabric:
    """A running ``weft serve`` and what the examples need to reach it."""

    proc: subprocess.Popen[bytes]
    home: Path
    port: int
    nats_port: int
    log: Path
    token: str | None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats_port}"

    def banner(self) -> str:
        """What ``weft serve`` printed so far (the banner comes first, on stderr)."""
        return self.log.read_text(errors="replace")

    def api(self, project: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if project:
            headers["X-Loom-Project"] = project
        return httpx.Client(base_url=self.url, headers=headers, timeout=10, verify=client_tls(self.url))

    def substitute(self, text: str) -> str:
        """The documented ports and paths replaced with this fabric's."""
        text = re.sub(r"(?:(?:\$PWD|/path(?:/to/loom)?)/)?\.venv/bin/", f"{BIN}/", text)
        text = text.replace(DOC_API_URL, self.url).replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")
        return text.replace(f"127.0.0.1:{DOC_NATS_PORT}", f"127.0.0.1:{self.nats_port}")


@contextlib.contextmanager
def running_weft(
    home: Path,
    args: list[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    token: str | None = None,
    port: int | None = None,
) -> Iterator[Fabric]:
    """``weft serve`` in its own session, on free ports, stopped (SIGTERM) on exit."""
    home.mkdir(parents=True, exist_ok=True)
    port, nats_port = port or free_port(), free_port()
    full_env = base_environment(home)
    full_env.update(WEFT_PORT=str(port), WEFT_NATS_PORT=str(nats_port), WEFT_NATS_WS_PORT="-1")
    if token:
        full_env["WEFT_API_TOKENS"] = token
    full_env.update(env or {})
    log = home / f"weft-{port}.log"
    proc = serve_in_background(args or ["serve"], full_env, cwd or home, log)
    fabric = Fabric(proc, home, port, nats_port, log, token)
    try:
        wait_healthy(fabric.url, proc, log)
        yield fabric
    finally:
        stop_process(proc)
