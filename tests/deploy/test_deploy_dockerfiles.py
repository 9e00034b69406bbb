"""Dockerfiles pass hadolint and the image rules; broken copies fail them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from deploy.checks.common import DEPLOY
from deploy.checks.dockerfiles import check_dockerfile, hadolint, policy, stages

DOCKERFILES = sorted((DEPLOY / "docker").glob("*.Dockerfile"))
BrokenCopy = Callable[[str, Callable[[str], str]], Path]


def test_both_images_exist() -> None:
    assert {p.name for p in DOCKERFILES} == {"weft.Dockerfile", "agent.Dockerfile"}


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint_and_policy(path: Path) -> None:
    assert check_dockerfile(path) == []


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_images_are_multi_stage_non_root_and_pinned(path: Path) -> None:
    args, found = stages(path.read_text())
    assert len(found) >= 2
    assert args["PYTHON_IMAGE"].startswith("python:3.11.") and "slim" in args["PYTHON_IMAGE"]
    final = found[-1]
    users = [rest for word, rest in final.instructions if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any(word == "HEALTHCHECK" for word, _ in final.instructions)


def test_hadolint_reports_an_unpinned_pip_install(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "docker/weft.Dockerfile",
        lambda t: t.replace("RUN /opt/loom/bin/pip install --no-cache-dir .", "RUN pip install requests"),
    )
    messages = [f.message for f in hadolint(bad)]
    assert any("DL3013" in m for m in messages), messages


def test_hadolint_reports_a_syntax_error(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "docker/agent.Dockerfile", lambda t: t.replace("WORKDIR /workspace", "WORKDIRR /workspace")
    )
    assert [f for f in hadolint(bad) if f.check == "hadolint"]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("python:3.11.13-slim-bookworm", "python:3.11-slim"), "pin the base image"),
        (lambda t: t.replace("USER 10001:10001\n", ""), "non-root USER"),
        (lambda t: t.replace("USER 10001:10001", "USER root"), "runs as root"),
        (
            lambda t: t.replace("HEALTHCHECK --interval", "# HEALTHCHECK --interval").replace(
                '    CMD ["python", "/opt/loom/healthcheck.py", "http"]\n', ""
            ),
            "HEALTHCHECK",
        ),
        (lambda t: t[: t.index("# ---- runtime")] + 'USER 10001\nHEALTHCHECK CMD ["true"]\n', "multi-stage"),
    ],
    ids=["floating-tag", "no-user", "root-user", "no-healthcheck", "single-stage"],
)
def test_policy_rejects_broken_copies(
    broken_copy: BrokenCopy, edit: Callable[[str], str], expected: str
) -> None:
    bad = broken_copy("docker/weft.Dockerfile", edit)
    messages = [f.message for f in policy(bad)]
    assert any(expected in m for m in messages), messages


def test_digest_pinned_base_is_accepted(broken_copy: BrokenCopy) -> None:
    digest = "python:3.11-slim@sha256:" + "0" * 64
    good = broken_copy("docker/weft.Dockerfile", lambda t: t.replace("python:3.11.13-slim-bookworm", digest))
    assert policy(good) == []


# -- the healthcheck script the images run ------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 200 if self.path == "/health" else 503
        self.send_response(code)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def http_port() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _healthcheck() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("loom_healthcheck", DEPLOY / "docker" / "healthcheck.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_http_healthcheck_against_a_real_server(http_port: int) -> None:
    hc = _healthcheck()
    assert hc.check_http(str(http_port)) is None  # type: ignore[attr-defined]
    assert "answered 503" in hc.check_http(str(http_port), "/other")  # type: ignore[attr-defined]


def test_http_healthcheck_reports_an_unreachable_port() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hc = _healthcheck()
    assert "unreachable" in hc.check_http(str(port))  # type: ignore[attr-defined]


def test_agent_healthcheck_finds_warp_processes(tmp_path: Path) -> None:
    hc = _healthcheck()
    for pid, argv in {
        "12": [b"/opt/loom/bin/python", b"/opt/loom/bin/warp"],
        "13": [b"/bin/sleep", b"5"],
    }.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    (tmp_path / "self").mkdir()
    assert hc.warp_processes(tmp_path) == [12]  # type: ignore[attr-defined]
    (tmp_path / "12" / "cmdline").write_bytes(b"/bin/sleep\x005\x00")
    assert hc.warp_processes(tmp_path) == []  # type: ignore[attr-defined]


def test_healthcheck_main_exit_codes(http_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    hc = _healthcheck()
    monkeypatch.setenv("WEFT_PORT", str(http_port))
    assert hc.main(["healthcheck.py", "http"]) == 0  # type: ignore[attr-defined]
    assert hc.main(["healthcheck.py", "bogus"]) == 1  # type: ignore[attr-defined]


def test_a_copy_source_missing_from_the_build_context_fails(broken_copy: BrokenCopy) -> None:
    bad = broken_copy(
        "docker/agent.Dockerfile", lambda t: t.replace("COPY deploy/runner ", "COPY deploy/runnr ")
    )
    messages = [f.message for f in policy(bad)]
    assert any("deploy/runnr: not in the build context" in m for m in messages), messages


def test_the_agent_images_entrypoint_needs_only_what_the_image_copies(tmp_path: Path) -> None:
    """The agent image copies deploy/__init__.py and deploy/runner to /opt/loom/app; the
    entrypoint must work from that alone (not from deploy/checks or the tests)."""
    import shutil
    import subprocess
    import sys

    app = tmp_path / "app"
    (app / "deploy").mkdir(parents=True)
    shutil.copy(DEPLOY / "__init__.py", app / "deploy" / "__init__.py")
    shutil.copytree(
        DEPLOY / "runner", app / "deploy" / "runner", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {
        "PYTHONPATH": str(app),
        "PATH": "/usr/bin:/bin",
        "LOOM_CORRELATION_ID": "r1",
        "LOOM_PROJECT_ID": "p",
    }
    done = subprocess.run(
        [sys.executable, "-m", "deploy.runner", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr  # a configuration error, not an ImportError
    assert "LOOM_CAPABILITIES" in done.stderr
    scripted = subprocess.run(
        [sys.executable, "-m", "deploy.runner.scripted_agent", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert scripted.returncode == 0, scripted.stderr
