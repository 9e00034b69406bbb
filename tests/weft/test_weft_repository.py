"""A project's repository and an item's checkpoints over Weft's REST API
(docs/workstreams.md): set, read, reachability, compare-and-set, every error path, no
credential echoed, isolation by project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from weft_helpers import claimant, register

from shared.models import Checkpoint, Workstream
from shared.names import ProjectNames
from testsupport.git import make_origin
from testsupport.work import work_queue

SECRET = "ghp_Zx81Qa9secret"


async def test_set_read_check_and_forget_the_repository(api: Any, tmp_path: Path) -> None:
    assert (await api.get("/api/repository")).status_code == 404
    origin = make_origin(tmp_path)
    put = await api.put("/api/repository", json={"url": str(origin)})
    assert put.status_code == 200, put.text
    body = put.json()
    repo = body["repository"]
    assert (repo["url"], repo["target_branch"], repo["worktree_root"], repo["enabled"]) == (
        str(origin),
        "main",
        ".loom/worktrees",
        True,
    )
    assert body["reach"] == {"reachable": True, "target_found": True, "problem": None}
    read = (await api.get("/api/repository")).json()
    assert read["repository"] == repo and read["reach"] is None
    checked = (await api.get("/api/repository", params={"check": "true"})).json()
    assert checked["reach"]["reachable"] is True

    # compare-and-set: a stale revision is refused, the current one accepted
    stale = await api.put(
        "/api/repository", params={"revision": repo["revision"] - 1}, json={"url": str(origin)}
    )
    assert stale.status_code == 409 and stale.json()["details"] == {"field": "revision", "rule": "unchanged"}
    moved = await api.put(
        "/api/repository",
        params={"revision": repo["revision"]},
        json={"url": str(origin), "target_branch": "release"},
    )
    assert moved.status_code == 200
    assert moved.json()["reach"] == {
        "reachable": True,
        "target_found": False,
        "problem": "the target branch release does not exist there yet",
    }
    assert (await api.delete("/api/repository")).status_code == 204
    assert (await api.get("/api/repository")).status_code == 404
    gone = await api.delete("/api/repository")
    assert gone.status_code == 404 and gone.json()["details"]["field"] == "repository"


async def test_an_unreachable_repository_is_reported_when_it_is_set(api: Any, tmp_path: Path) -> None:
    put = await api.put("/api/repository", json={"url": str(tmp_path / "nowhere.git")})
    assert put.status_code == 200
    reach = put.json()["reach"]
    assert reach["reachable"] is False and reach["problem"].startswith("git ls-remote failed")


async def test_bad_settings_name_the_field_and_rule_and_never_echo_a_credential(api: Any) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": f"https://bot:{SECRET}@example.com/app.git"}, "url"),
        ({"url": f"https://{SECRET}@example.com/app.git"}, "url"),
        ({"url": "ftp://example.com/x.git"}, "url"),
        ({"url": "/srv/app.git", "branch_template": "loom/{task_id}"}, "branch_template"),
        ({"url": "/srv/app.git", "worktree_root": "../up"}, "worktree_root"),
        ({"url": "/srv/app.git", "keep_days": -1}, "keep_days"),
        ({"url": "/srv/app.git", "extra": 1}, "extra"),
        ({"url": "/srv/app.git", "forge": "github"}, "github_repository"),
        ({"url": "/srv/app.git", "github_api_url": f"https://x:{SECRET}@api.example"}, "github_api_url"),
        ({"url": "/srv/app.git", "gate": ["make", "a\x00b"]}, "gate"),
        ({"url": "/srv/app.git", "land_mode": "squash"}, "land_mode"),
    ]
    for body, field in cases:
        res = await api.put("/api/repository", json=body)
        assert res.status_code == 422, (body, res.text)
        assert SECRET not in res.text and "example.com" not in res.text, res.text
        assert field in res.text
    bad_branch = await api.put("/api/repository", json={"url": "/srv/app.git", "target_branch": "a..b"})
    assert bad_branch.status_code == 400
    assert bad_branch.json()["details"] == {"field": "target_branch", "rule": "ref_format"}
    assert "a..b" not in bad_branch.text
    assert (await api.get("/api/repository")).status_code == 404  # nothing was stored


async def test_the_repository_is_per_project(weft: Any, api: Any, tmp_path: Path) -> None:
    origin = make_origin(tmp_path)
    assert (await api.put("/api/repository", json={"url": str(origin)})).status_code == 200
    async with weft.client(project="other-project") as other:
        assert (await other.get("/api/repository")).status_code == 404
        assert (await other.put("/api/repository", json={"url": "/srv/other.git"})).status_code == 200
    assert (await api.get("/api/repository")).json()["repository"]["url"] == str(origin)


async def test_checkpoints_are_listed_and_one_is_chosen_for_the_next_attempt(
    api: Any, nc: NatsClient, project_id: str
) -> None:
    agent = await register(nc, project_id)
    queue = work_queue(nc, ProjectNames(project_id))
    work_id = (
        await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
    ).json()["id"]
    assert (await api.get(f"/api/work/{work_id}/checkpoints")).json() == {
        "work_id": work_id,
        "branch": None,
        "resume_from": None,
        "checkpoints": [],
    }
    assert (await api.post(f"/api/work/{work_id}/restore", json={"checkpoint": "abcd"})).status_code == 409
    taken = await queue.claim(claimant(agent))
    assert taken is not None
    old, new = "a" * 40, "b" * 40
    points = [
        Checkpoint(sha=new, attempt=1, agent_id=agent.agent_id),
        Checkpoint(sha=old, attempt=1, agent_id=agent.agent_id),
    ]
    ws = Workstream(branch="loom/x", base_ref="main", base_sha="c" * 40, checkpoints=points, resume_from=new)
    await queue.record_workstream(work_id, agent.agent_id, ws, step="checkpoint")
    listed = (await api.get(f"/api/work/{work_id}/checkpoints")).json()
    assert [c["sha"] for c in listed["checkpoints"]] == [new, old] and listed["resume_from"] == new
    chosen = await api.post(f"/api/work/{work_id}/restore", json={"checkpoint": "aaaa"})
    assert chosen.status_code == 200 and chosen.json()["resume_from"] == old
    unknown = await api.post(f"/api/work/{work_id}/restore", json={"checkpoint": "dddd"})
    assert unknown.status_code == 404 and unknown.json()["details"]["field"] == "checkpoint"
    short = await api.post(f"/api/work/{work_id}/restore", json={"checkpoint": "a"})
    assert short.status_code == 422
    nodes = [d["node"] for d in (await api.get(f"/api/contexts/{work_id}/nodes")).json()["items"]]
    said = [n["text"] for n in nodes if n["kind"] == "workstream"]
    assert said == [
        "Checkpoint bbbbbbbbbbbb of branch loom/x's worktree.",
        "The operator chose checkpoint aaaaaaaaaaaa for the next attempt.",
    ]


async def test_an_items_diff_is_read_from_the_repository(
    weft_factory: Any, nc: NatsClient, project_id: str, tmp_path: Path
) -> None:
    from shared.git.repository import Repository
    from shared.git.workstream import HostWorkstreams
    from shared.settings import LoomSettings
    from testsupport.git import clone

    origin = make_origin(tmp_path, {"README.md": "hello\n", "old.txt": "old\n", "keep.txt": "k\n"})
    async with (
        weft_factory(project_id=project_id, loom=LoomSettings(data_dir=tmp_path / "weft-data")) as weft,
        weft.client() as api,
    ):
        assert (await api.put("/api/repository", json={"url": str(origin)})).status_code == 200
        agent = await register(nc, project_id)
        queue = work_queue(nc, ProjectNames(project_id))
        work_id = (
            await api.post("/api/work", json={"task_id": "t", "description": "d", "capability": "code"})
        ).json()["id"]
        assert (await api.get(f"/api/work/{work_id}/diff")).status_code == 409  # no workstream yet
        item = await queue.claim(claimant(agent))
        assert item is not None
        host = HostWorkstreams(
            clone(origin, tmp_path / "host"), Repository(url=str(origin)), author=("a", "a@x")
        )
        place, record = await host.open(item)
        (place.directory / "README.md").write_text("hello\nworld\n")
        (place.directory / "old.txt").unlink()
        (place.directory / "new.bin").write_bytes(b"\x00\x01binary")
        cp = await host.checkpoint(place, work_id, attempt=1, agent_id=agent.agent_id, previous=None)
        assert cp is not None
        with_cp = record.model_copy(update={"checkpoints": [cp], "resume_from": cp.sha})
        await queue.record_workstream(work_id, agent.agent_id, with_cp, step="checkpoint")

        body = (await api.get(f"/api/work/{work_id}/diff")).json()
        assert body["head_sha"] == cp.sha and body["base_sha"] == record.base_sha and not body["truncated"]
        files = {f["path"]: (f["status"], f["insertions"], f["deletions"]) for f in body["files"]}
        assert files == {"README.md": ("M", 1, 0), "old.txt": ("D", 0, 1), "new.bin": ("A", None, None)}
        assert "+world" in body["diff"] and "-old" in body["diff"]
        short = await api.get(f"/api/work/{work_id}/diff", params={"checkpoint": cp.sha[:10]})
        assert short.status_code == 200 and short.json()["head_sha"] == cp.sha[:10]
        bad = await api.get(f"/api/work/{work_id}/diff", params={"checkpoint": "--output=x"})
        assert bad.status_code == 422 and "--output" not in bad.text
        unknown = await api.get(f"/api/work/{work_id}/diff", params={"checkpoint": "ab" * 20})
        assert unknown.status_code == 404 and unknown.json()["details"]["field"] == "checkpoint"
