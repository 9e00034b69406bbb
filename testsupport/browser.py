"""Debian's chromium, driven by Playwright, for the console's browser tests (``tests/console``)
and the console bench (``test-scenarios/performance/bench_console.py``).

The browser is never one Playwright downloads: ``LOOM_CHROMIUM`` when set, else
``/usr/bin/chromium`` (``make install`` installs it), else ``chromium`` on the ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # without these Chromium's own connections are refused on a closed network
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Chromium's flags for both: headless, no sandbox (CI runs as root), and nothing that
reaches for the network on its own."""


def chromium_path() -> str | None:
    """The chromium to drive, or None when there is none."""
    configured = os.environ.get("LOOM_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium")
