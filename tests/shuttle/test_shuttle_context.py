"""``shuttle context show|list`` against a real Weft on a real nats-server."""

from __future__ import annotations

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
