"""Start ``weft serve`` as a real process for deploy tests and wait until /health answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import httpx

from shared.nats.server import free_port

WEFT = Path(sys.executable).parent / "weft"
START_TIMEOUT_S = 60.0


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


@contextlib.asynccontextmanager
async def running_weft(env: Mapping[str, str], log: Path) -> AsyncIterator[str]:
    """Yield Weft's base URL once GET /health is 200; stop it (SIGTERM) afterwards."""
    port = int(env.get("WEFT_PORT") or free_port())
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env, "WEFT_PORT": str(port)}
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            str(WEFT), "serve", env=full, stdout=out, stderr=asyncio.subprocess.STDOUT
        )
        base = f"http://127.0.0.1:{port}"
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + START_TIMEOUT_S
            async with httpx.AsyncClient(timeout=2) as client:
                while True:
                    if process.returncode is not None:
                        raise AssertionError(
                            f"weft exited with {process.returncode}: {await asyncio.to_thread(_tail, log)}"
                        )
                    with contextlib.suppress(httpx.TransportError):
                        if (await client.get(f"{base}/health")).status_code == 200:
                            break
                    if loop.time() > deadline:
                        raise AssertionError(
                            f"weft did not become healthy: {await asyncio.to_thread(_tail, log)}"
                        )
                    await asyncio.sleep(0.1)
            yield base
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), timeout=20)
                except TimeoutError:
                    process.kill()
                    await process.wait()
