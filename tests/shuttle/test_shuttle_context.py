"""``shuttle context show|list`` against a real Weft on a real nats-server."""

from __future__ import annotations

import json
from pathlib import Path

from shuttle_helpers import Cli


def build_tree(cli: Cli) -> tuple[str, list[str]]:
    """A tree with a branch and a deeper chain, made through Weft's REST API."""
    with cli.weft.api(cli.project) as api:
        tree = api.post(
            "/api/contexts", json={"title": "parser rewrite", "text": "rewrite the parser"}
        ).json()
        tid, root = tree["tree_id"], tree["root"]["id"]

        def add(parent: str, text: str) -> str:
            response = api.post(f"/api/contexts/{tid}/nodes", json={"parent_id": parent, "text": text})
            assert response.status_code == 201, response.text
            return str(response.json()["node"]["id"])

        regex = add(root, "try regex")
        add(regex, "regex fails on nesting")
        add(root, "try a PEG")
        return tid, [root, regex]


def test_show_draws_the_tree(cli: Cli) -> None:
    tid, _ = build_tree(cli)
    r = cli("context", "show", tid)
    assert r.exit_code == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert "parser rewrite" in lines[0] and "4 nodes" in lines[0]
    order = ["rewrite the parser", "try regex", "regex fails on nesting", "try a PEG"]
    found = [next(i for i, line in enumerate(lines) if text in line) for text in order]
    assert found == sorted(found)
    indent = [len(lines[i]) - len(lines[i].lstrip("│├└─ ")) for i in found]
    assert indent[2] > indent[1] > indent[0] and indent[3] == indent[1]  # the tree's shape


def test_show_json_and_limit(cli: Cli) -> None:
    tid, ids = build_tree(cli)
    doc = cli.json("context", "show", tid, "--limit", "2")
    assert [n["node"]["id"] for n in doc["nodes"]] == ids and doc["next_cursor"]
    assert doc["tree"]["meta"]["title"] == "parser rewrite"


def test_show_unknown_tree_names_the_field(cli: Cli) -> None:
    r = cli("context", "show", "d" * 32)
    assert r.exit_code != 0 and "tree_id: no context tree with this id" in r.stderr


def test_list(cli: Cli) -> None:
    tid, _ = build_tree(cli)
    assert [e["tree_id"] for e in cli.json("context", "list", "--kind", "tree")["items"]] == [tid]
    r = cli("context", "list", "-q")
    assert r.exit_code == 0 and r.stdout.split() == [tid]


def test_export_import_delete_and_restore(cli: Cli, tmp_path: Path) -> None:
    tid, ids = build_tree(cli)
    with cli.weft.api(cli.project) as api:
        api.post(f"/api/contexts/{tid}/nodes/{ids[1]}/versions", json={"text": "try regex, v2"})
    target = tmp_path / "tree.json"
    r = cli("context", "export", tid, "--output", str(target))
    assert r.exit_code == 0, r.stderr
    document = json.loads(target.read_text())
    assert document["format"] == "loom-context-tree" and len(document["nodes"]) == 5  # a version too
    other = f"{cli.project}-copy"
    done = json.loads(cli("context", "import", str(target), "--json", env={"LOOM_PROJECT_ID": other}).stdout)
    assert done["imported"] == 5 and done["tree"]["meta"]["ref"] == {"imported_from": tid}
    again = cli("context", "import", str(target), env={"LOOM_PROJECT_ID": other})
    assert again.exit_code == 0 and "0 nodes stored" in again.stdout
    copy = done["tree"]["tree_id"]
    shown = cli("context", "show", copy, env={"LOOM_PROJECT_ID": other})
    assert "try regex, v2" in shown.stdout and "regex fails on nesting" in shown.stdout
    # a file that is not JSON: usage error naming the argument, its text not repeated
    bad = tmp_path / "bad.json"
    bad.write_text("ghp_" + "Q" * 36)
    r = cli("context", "import", str(bad))
    assert r.exit_code == 2 and r.stderr.startswith("shuttle: error: file:") and "QQQQ" not in r.stderr
    # staged deletion and its undo
    r = cli("context", "delete", tid)
    assert r.exit_code == 0 and f"shuttle context restore {tid}" in r.stdout
    assert cli("context", "delete", tid).exit_code == 1
    assert cli("context", "restore", tid).exit_code == 0
    assert cli.json("context", "show", tid)["tree"]["deleting"] is None
