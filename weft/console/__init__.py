"""The console: a single-page app at ``/`` over Weft's own REST API and WebSocket.

Hand-written HTML, CSS and ES modules in ``static/`` (package data: no build step, no CDN,
nothing fetched from elsewhere). The files hold no project data and no secret, so they are
served without a token, like ``/docs``; everything the page shows it reads through
``/api/...`` and ``/api/ws`` with the token the operator typed (kept in the tab's
``sessionStorage`` only). See docs/console.md.
"""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Query
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
ASSET_PREFIX = "/console"

# Only this origin's scripts, styles and connections (the REST API and the WebSocket);
# no frames, no inline script, no forms posted anywhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class ConsoleFiles(StaticFiles):
    """The console's assets, with the same security headers as the page."""

    def file_response(
        self,
        full_path: PathLike[str] | str,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(SECURITY_HEADERS)
        return response


def install(app: FastAPI) -> None:
    """Serve the console at ``/`` and its assets under ``/console/``."""

    @app.get("/", include_in_schema=False)
    async def console(
        project: Annotated[str | None, Query(max_length=63, description="Read by the page itself")] = None,
    ) -> FileResponse:
        """The page; ``?project=`` is the project it shows (the page sends it as X-Loom-Project)."""
        return FileResponse(STATIC_DIR / "index.html", headers=SECURITY_HEADERS)

    app.mount(ASSET_PREFIX, ConsoleFiles(directory=STATIC_DIR), name="console")
