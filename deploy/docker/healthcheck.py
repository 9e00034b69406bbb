"""Container health checks for the Loom images (stdlib only: slim images carry no curl).

``healthcheck.py http``  -- Weft: GET http://127.0.0.1:$WEFT_PORT/health must answer 200.
``healthcheck.py agent`` -- agent image: a ``warp`` process must be alive, because an agent
                            without its Warp MCP server is not part of the fabric.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path


def check_http(port: str, path: str = "/health", timeout_s: float = 4.0) -> str | None:
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{url} unreachable: {exc}"
    return None if status == 200 else f"{url} answered {status}"


def warp_processes(proc: Path = Path("/proc")) -> list[int]:
    """PIDs whose command line runs the ``warp`` console script."""
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(Path(arg.decode(errors="replace")).name == "warp" for arg in argv[:2] if arg):
            found.append(int(entry.name))
    return found


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "http"
    if mode == "http":
        problem = check_http(os.environ.get("WEFT_PORT", "8080"))
    elif mode == "agent":
        problem = None if warp_processes() else "no warp process is running"
    else:
        problem = f"unknown mode {mode!r}; use 'http' or 'agent'"
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
