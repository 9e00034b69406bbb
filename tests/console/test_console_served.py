"""How Weft serves the console (no browser): the page and its assets without a token (they
hold no data), with a strict content security policy; the API behind them still needs one;
the files are package data, so a non-editable install ships them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx
from console_helpers import ADMIN_TOKEN, ConsoleWeft

from weft.console import STATIC_DIR

ROOT = Path(__file__).resolve().parents[2]


async def test_page_and_assets_are_served_without_a_token_and_the_data_is_not(
    console_weft: ConsoleWeft,
) -> None:
    async with httpx.AsyncClient(base_url=console_weft.url, timeout=10) as client:
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
        assert page.headers["referrer-policy"] == "no-referrer"
        for asset in re.findall(r'(?:src|href)="(/console/[^"]+)"', page.text):
            served = await client.get(asset)
            assert served.status_code == 200, asset
            assert served.headers["content-security-policy"] == policy
        module = await client.get("/console/views/work.js")
        assert module.status_code == 200 and "javascript" in module.headers["content-type"]
        missing = await client.get("/console/nothing-here.js")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert (await client.get("/?project=demo")).status_code == 200
        refused = await client.get("/?colour=blue")  # unknown query parameters stay refused
        assert refused.status_code == 422 and "blue" not in refused.text
        assert (await client.get("/api/stats")).status_code == 401
        ok = await client.get("/api/stats", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert ok.status_code == 200


def test_every_console_file_is_package_data_and_nothing_loads_from_elsewhere() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["weft.console"]
    package = STATIC_DIR.parent
    shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
    files = {p for p in STATIC_DIR.rglob("*") if p.is_file()}
    assert files and files <= shipped
    for path in files:
        text = path.read_text().replace("http://www.w3.org/2000/svg", "")  # a namespace, not a fetch
        # no CDN, no remote font or script: the console works offline
        assert not re.search(r"https?://", text), f"{path.name} refers to another site"
        if path.suffix == ".js":
            imports = re.findall(r'from "([^"]+)"', text)
            assert all(i.startswith("./") or i.startswith("../") for i in imports), path.name
            assert "innerHTML" not in text, f"{path.name}: text goes in through textContent only"
