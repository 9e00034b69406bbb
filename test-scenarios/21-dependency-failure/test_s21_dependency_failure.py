"""Scenario 21: a dependency is dead-lettered, the items waiting for it fail naming it (and
their own dependents after them), and retrying it from the DLQ revives the whole chain,
which then runs to the end in order."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from scenario_harness import Fabric, agents_in, new_project_id

PLAN = """\
- {name: schema, task_id: schema, description: design the schema, capability: migrate}
- {name: migrate, task_id: migrate, description: run the migration, capability: code, after: [schema]}
- {name: api, task_id: api, description: the API, capability: code, after: [migrate]}
- {name: docs, task_id: docs, description: the docs, capability: code, after: [api]}
- {name: lint, task_id: lint, description: lint, capability: code}
"""


async def test_a_dead_dependency_fails_its_chain_and_a_dlq_retry_revives_it(
    fabric: Fabric, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    ids = (await fabric.shuttle_json("submit", "--file", str(plan)))["names"]

    async with AsyncExitStack() as stack:
        agents = await agents_in(
            stack,
            fabric,
            {"dba": {"capabilities": ["migrate"]}, "coder": {"capabilities": ["code"]}},
        )
        dba, coder = agents["dba"], agents["coder"]
        lint = await coder.claim()
        assert lint is not None and lint["id"] == ids["lint"]  # the only code item not blocked
        await coder.call("warp_work_complete", work_id=ids["lint"])
        assert await coder.claim() is None  # everything else waits for the schema

        schema = await dba.claim()
        assert schema is not None and schema["id"] == ids["schema"]
        failed = await dba.call(
            "warp_work_fail", work_id=ids["schema"], error="no DBA sign-off", retryable=False
        )
        assert failed["item"]["status"] == "dead-lettered"

        shown = {
            name: await fabric.shuttle_json("work", "show", ids[name]) for name in ("migrate", "api", "docs")
        }
        assert {s["status"] for s in shown.values()} == {"dead-lettered"}
        assert shown["migrate"]["error"] == f"dependency {ids['schema']} was dead-lettered"
        assert shown["api"]["error"] == (
            f"dependency {ids['migrate']} was dead-lettered (its dependency {ids['schema']} failed)"
        )
        assert shown["docs"]["failed_dependency"] == ids["api"]
        letters = await fabric.shuttle_json("dlq", "list")
        assert {entry["item"]["id"] for entry in letters["items"]} == {
            ids[n] for n in ("schema", "migrate", "api", "docs")
        }
        tree = await fabric.shuttle("work", "graph", ids["api"])
        assert tree.exit_code == 0 and tree.stdout.count("dead-lettered") == 4
        alone = await fabric.shuttle("dlq", "retry", ids["api"])  # not while its cause is still dead
        assert alone.exit_code == 1 and "retry that one first" in alone.stderr

        retried = await fabric.shuttle_json("dlq", "retry", ids["schema"])
        assert retried["status"] == "queued"
        for name in ("migrate", "api", "docs"):
            back = await fabric.shuttle_json("work", "show", ids[name])
            assert back["status"] == "blocked" and back["failed_dependency"] is None, name
        assert (await fabric.shuttle_json("dlq", "list"))["items"] == []

        # Another project cannot see the chain or retry into it.
        other = fabric.project(new_project_id())
        foreign = await other.shuttle("dlq", "retry", ids["schema"])
        assert foreign.exit_code == 1 and "no work item with this id in this project" in foreign.stderr

        order = []
        for agent in (dba, coder, coder, coder):
            item = await agent.claim()
            assert item is not None
            order.append(item["task_id"])
            await agent.call("warp_work_complete", work_id=item["id"])
        assert order == ["schema", "migrate", "api", "docs"]
    done = await fabric.shuttle("work", "graph", ids["docs"])
    assert done.exit_code == 0 and done.stdout.count("completed") == 4
