"""The documentation's examples stay true: every fenced block of README.md and docs/*.md is
classified, and the ones marked to run are run against a live fabric.

Where blocks are classified: ``EXAMPLES`` in tests/docs/doc_examples.py, one entry per
block (file + the start of its first line): ``run("<how>")`` names the runner below (or
``walkthrough``, test_doc_walkthrough.py), ``Skip("<reason>")`` says why it is not run;
``SECTIONS`` there covers pattern.md's tool examples, replayed as one session
(pattern_transcript.py). A new or changed block without an entry fails
:func:`test_every_block_is_classified` with the entry to add. Warp's tool transcripts are
not run but held against the tools Warp publishes (warp_transcript.py).
``python tests/docs/doc_examples.py`` prints the counts.

The fabric: the real ``weft serve`` with its bundled nats-server on free ports, a fresh
HOME (so a fresh data folder and no ``~/.loom``), Weft's default project ``demo`` (the
project weft.md's examples show), the bearer token ``tok`` (weft.md's ``H``), and
background health checks off (the examples' targets name hosts that do not exist).

Substitutions, the only changes made to an example before it runs:

1. Ports: the docs' Weft ``127.0.0.1:8080`` and NATS ``127.0.0.1:4222`` are the fabric's
   free ports (``--port 8080`` too); Shuttle gets Weft's URL as ``LOOM_API_URL`` where the
   example does not name one (Shuttle's default is the docs' URL), and ``W`` is Weft's URL as
   weft.md's examples assume (``export W=... H=...``).
2. Paths: ``.venv/bin/`` (also after ``$PWD/``, ``/path/`` or ``/path/to/loom/``) is the
   folder of the Python running the tests, where bare ``shuttle``, ``weft``, ``warp`` and
   ``pattern`` are found first on PATH; HOME, ``/home/me`` and a project folder
   (``/path/to/repo``) are fresh folders; a file an example names (``policy.yaml``) is
   written from the example that shows it; a target without a ``name`` gets one.
3. Tokens: ``tok`` is the fabric's token; ``LOOM_API_TOKEN=...`` and ``$TOKEN`` stand for it.
4. Ids: an id the docs show (32 hex digits, or cut short with ``…``/``...``) stands for
   the id an earlier command of the same example returned; a project id is a fresh one
   where the example would otherwise share the project with other examples; placeholders
   (``<the project id from the banner>``) are what the banner printed.

Output the docs show is compared with what the command printed, except what changes from
run to run: ids, clock times, ages and generated task ids are masked, JSON elisions
(``...``, ``…``, ``{Event}``) match anything, ids and times in JSON match any id and time,
and values under the keys an entry lists as unchecked (counts that depend on what else the
fabric holds) only need to be present. Lines of a transcript that only appear now and
then (``work.waiting``, Weft's note that an item waits) may be missing from the docs.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main
import warp_transcript
import yaml
from doc_examples import TOOL_TRANSCRIPT, Block, Run, Skip, all_blocks, classify, entry_for, run
from fabric import BIN, REPO, Fabric, base_environment, running_weft
from mcp_client import call, mcp_session, text_of
from pattern_transcript import Outcome, replay
from transcript import commands, mismatches, normalized, run_shell, shown_json

from shared.agents.registry import Registry
from shared.models import AgentEntry, WorkItem
from shared.names import ProjectNames
from shared.nats.client import connect
from shared.nats.server import free_port
from shared.tasks import tick
from shared.tls import client_tls
from shared.work.queue import WorkQueue
from shared.work.rules import Claimant
from shuttle.cli import app as shuttle_app
from testsupport.serving import ws_connect
from testsupport.work import work_queue
from weft.demo import end_processes_with, processes_with

TOKEN = "tok"
PROJECT = "demo"
BLOCKS = all_blocks()
CLASSIFIED, PROBLEMS = classify(BLOCKS)
RUNNABLE = [(b, e) for b, e in CLASSIFIED.items() if isinstance(e, Run) and e.how != "walkthrough"]


def test_every_block_is_classified() -> None:
    assert not PROBLEMS, "\n\n".join(PROBLEMS)


def test_every_runner_named_exists() -> None:
    unknown = {e.how for _, e in RUNNABLE} - set(RUNNERS)
    assert not unknown, f"EXAMPLES names runners that test_doc_examples.py does not have: {unknown}"


def test_an_unclassified_block_fails_with_the_entry_to_add(tmp_path: Path) -> None:
    import doc_examples

    doc = tmp_path / "new.md"
    doc.write_text("# New\n\n```sh\nshuttle frobnicate --now\n```\n")
    block = doc_examples.Block("docs/new.md", 3, "sh", "shuttle frobnicate --now\n", "New")
    _, problems = classify([*BLOCKS, block])
    assert [p for p in problems if p.startswith("docs/new.md")] == [
        "docs/new.md:3: this ```sh block (under 'New') is not classified. Add it to EXAMPLES in "
        "tests/docs/doc_examples.py, either run by a test or not run with the reason:\n"
        "    ('docs/new.md', 'shuttle frobnicate --now'): run(\"...\") or Skip(\"...\"),"
    ]


def test_blocks_are_found_in_lists_and_keyed_past_a_lone_brace(tmp_path: Path) -> None:
    import doc_examples

    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "x.md"
    doc.write_text('## A\n\n1. Step:\n\n   ```json\n   {\n     "k": 1\n   }\n   ```\n\n~~~\nplain\n~~~\n')
    original = doc_examples.REPO
    doc_examples.REPO = tmp_path
    try:
        found = doc_examples.extract(doc)
    finally:
        doc_examples.REPO = original
    assert [(b.line, b.info, b.text, b.heading, b.key) for b in found] == [
        (5, "json", '{\n  "k": 1\n}\n', "A", ("docs/x.md", '"k": 1')),
        (11, "", "plain\n", "A", ("docs/x.md", "plain")),
    ]


async def test_warp_transcripts_agree_with_the_tools_warp_publishes(tmp_path: Path) -> None:
    """What warp.md's transcripts are held to (they are listed as not run): real tools, real
    arguments, real result fields (warp_transcript.py)."""
    blocks = [b for b, e in CLASSIFIED.items() if b.path == "docs/warp.md" and e == Skip(TOOL_TRANSCRIPT)]
    assert len(blocks) >= 10
    async with mcp_session(str(BIN / "warp"), base_environment(tmp_path), tmp_path) as warp:
        tools = {tool.name: tool for tool in (await warp.list_tools()).tools}
    checked = 0
    for block in blocks:
        shown = warp_transcript.calls(block.text)
        assert shown, f"{block.where}: no calls found"
        found = warp_transcript.problems(shown, tools)
        assert not found, f"{block.where}:\n" + "\n".join(found)
        checked += len(shown)
    assert checked >= 30
    wrong = warp_transcript.calls(
        '→ warp_work_claim {"capabilty": "code"}\n← {"claimed": true, "itemz": null}\n'
    )
    assert warp_transcript.problems(wrong, tools) == [
        "warp_work_claim: no argument ['capabilty'] (it takes ['capability'])",
        "warp_work_claim: its result has no ['itemz'] (it has ['claimed', 'context', 'item', 'reason',"
        " 'review', 'workstream'])",
    ]


def test_shown_output_is_compared_except_what_the_docs_elide() -> None:
    shown = shown_json(
        '{"id":"5c1f...","status":"queued","n":3,"at":"2026-01-01T00:00:00Z","more":{...},'
        '"why":"filters.x: not a filter (allowed: ...)", ...}'
    )
    real = {
        "id": uuid.uuid4().hex,
        "status": "queued",
        "n": 3,
        "at": "2031-05-05T10:00:00.5+00:00",
        "more": [1],
        "why": "filters.x: not a filter (allowed: a, b)",
        "extra": True,
    }
    assert mismatches(real, shown) == []
    assert mismatches({**real, "status": "claimed", "n": 4}, shown, unchecked=("n",)) == [
        "$.status: 'claimed', the docs show 'queued'"
    ]
    assert mismatches({k: v for k, v in real.items() if k != "why"}, shown) == ["$.why: missing"]
    assert mismatches({**real, "why": "something else"}, shown) == [
        "$.why: 'something else', the docs show 'filters.x: not a filter (allowed: ...)'"
    ]
    assert normalized("14:22:43  work.claimed   by 7c1e0b7d9f3a4c1b8e2d5f6a7b8c9d0e (3s ago)") == [
        "<time> work.claimed by <id> (<ago>)"
    ]


# -- the fabric ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    home = tmp_path_factory.mktemp("docs-home")
    env = {
        "WEFT_PROJECT_ID": PROJECT,
        "WEFT_SPINUP_HEALTH_CHECKS": "false",
        "WEFT_SWEEP_INTERVAL_S": "1",
        # nats-server's own sync interval, not an fsync per write (Weft's default): the
        # examples' many writes share a disk the whole suite loads, where one fsync once
        # stalled past a client's 5 s request timeout (a KV update of watch-output, 4 CI runs)
        "LOOM_NATS_SYNC": "2m",
    }
    with running_weft(home, env=env, token=TOKEN) as running:
        running.env = {
            **base_environment(home),
            "W": running.url,
            "H": f"Authorization: Bearer {TOKEN}",
            "TOKEN": TOKEN,
            "LOOM_API_URL": running.url,
            "LOOM_API_TOKEN": TOKEN,
        }
        try:
            yield running
        finally:
            _shut_agents_down(running)
    end_processes_with("HOME", str(home))  # an agent a target started and nobody stopped
    assert not processes_with("HOME", str(home))


def _shut_agents_down(fabric: Fabric) -> None:
    """Ask every agent still online in the projects the examples used to leave."""
    with fabric.api() as api:
        projects = [p["project_id"] for p in api.get("/api/stats/projects").json()["projects"]]
        for project in projects:
            headers = {"X-Loom-Project": project}
            agents = api.get("/api/agents", params={"limit": 1000}, headers=headers).json()["items"]
            ids = [a["agent_id"] for a in agents if a["status"] != "offline"]
            if ids:
                api.post("/api/agents/shutdown-batch", json={"agent_ids": ids, "grace_s": 1}, headers=headers)


@dataclass
class Example:
    block: Block
    entry: Run
    fabric: Fabric
    folder: Path

    @property
    def env(self) -> dict[str, str]:
        return dict(self.fabric.env)

    def shell(self, command: str, env: dict[str, str] | None = None) -> Any:
        return run_shell(self.fabric.substitute(command), env or self.env, self.folder)


CONCURRENCY = 4
"""Examples run side by side: most of their time is waiting (a process starting, an agent
spun up, a retry), and each uses a project, folder and names of its own where it could
meet another."""


@pytest.fixture(scope="module")
async def started(
    request: pytest.FixtureRequest, fabric: Fabric, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[Block, asyncio.Task[None]]]:
    """Every selected example, started at once (at most CONCURRENCY running); each test
    waits for its own and reports its outcome."""
    for tool in ("bash", "curl", "jq"):
        assert shutil.which(tool), f"the docs' examples use {tool}; install it"
    selected = {
        item.callspec.params["block"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_example"
    }
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(block: Block, entry: Run) -> None:
        example = Example(block, entry, fabric, tmp_path_factory.mktemp("example"))
        if entry.how in SHARED:  # waits for a run shared by many blocks: no slot of its own
            await run_example(example)
            return
        async with gate:
            await run_example(example)

    tasks = {
        block: asyncio.create_task(one(block, entry), name=f"{block.where}:{entry.how}")
        for block, entry in RUNNABLE
        if block in selected
    }
    try:
        yield tasks
    finally:
        for task in tasks.values():
            task.cancel()
        # Bounded, and naming what did not end: a teardown once waited past pytest's timeout
        # on something that never finished, and the stack did not say which example it was.
        _, stuck = await asyncio.wait(tasks.values(), timeout=30) if tasks else (set(), set())
        assert not stuck, "examples still running 30 s after being cancelled: " + ", ".join(
            sorted(t.get_name() for t in stuck)
        )


EXAMPLE_TIMEOUT_S = 90


async def run_example(example: Example) -> None:
    runner = RUNNERS[example.entry.how]
    if asyncio.iscoroutinefunction(runner):
        await asyncio.wait_for(runner(example), EXAMPLE_TIMEOUT_S)
    else:
        await asyncio.wait_for(asyncio.to_thread(runner, example), EXAMPLE_TIMEOUT_S)


@pytest.mark.parametrize(("block", "entry"), RUNNABLE, ids=[f"{b.where}:{e.how}" for b, e in RUNNABLE])
async def test_example(block: Block, entry: Run, started: dict[Block, asyncio.Task[None]]) -> None:
    await started[block]


# -- runners ------------------------------------------------------------------------------
def check_json_output(example: Example, stdout: str, shown: list[str]) -> None:
    problems = mismatches(json.loads(stdout), shown_json("\n".join(shown)), example.entry.unchecked)
    assert not problems, f"{example.block.where}: the output differs from the docs:\n" + "\n".join(problems)


def run_shell_block(example: Example) -> None:
    """Each command in turn must succeed; JSON shown after one must match what it printed."""
    for command in commands(example.block.text):
        result = example.shell(command.line)
        assert result.returncode == 0, f"{command.line}\n{result.stdout}{result.stderr}"
        if command.output and command.output[0].lstrip().startswith(("{", "[")):
            check_json_output(example, result.stdout, command.output)


async def run_agents_block(example: Example) -> None:
    """The agents listing shows an online agent: register the one the example shows."""
    shown = shown_json("\n".join(commands(example.block.text)[0].output))["items"][0]
    fields = {k: v for k, v in shown.items() if k in AgentEntry.model_fields and not str(v).startswith("<<")}
    fields.update(agent_id=uuid.uuid4().hex, user_id="0123456789abcdef")
    entry = AgentEntry.model_validate(fields)
    nc = await connect(url=example.fabric.nats_url, name="docs-agent")
    try:
        registry = Registry(nc.jetstream(), ProjectNames(PROJECT))
        await registry.put(entry)
        await asyncio.to_thread(run_shell_block, example)
        await registry.remove(entry.agent_id)
    finally:
        await nc.close()


def request_for(example: Example) -> tuple[str, str, dict[str, str], Any]:
    """The request whose answer a JSON block of weft.md shows."""
    text = example.block.text
    auth = {"Authorization": f"Bearer {TOKEN}"}
    if '"unauthorized"' in text:
        return "GET", "/api/work", {}, None
    if '"invalid_project"' in text:
        return "GET", "/api/work", {**auth, "X-Loom-Project": "Bad_Project"}, None
    if '"results"' in text:
        with example.fabric.api() as api:
            item = api.post(
                "/api/work", json={"task_id": "t", "description": "d", "capability": "code"}
            ).json()
        return "POST", "/api/work/cancel-batch", auth, {"work_ids": [item["id"], "0" * 32]}
    if '"project_id":"demo"' in text:
        return "GET", "/api/stats", auth, None
    raise AssertionError(f"{example.block.where}: no request known for this response")


def run_response_block(example: Example) -> None:
    method, path, headers, body = request_for(example)
    url = example.fabric.url
    with httpx.Client(base_url=url, timeout=10, verify=client_tls(url)) as client:
        response = client.request(method, path, headers=headers, json=body)
    shown = shown_json(example.block.text)
    if not example.entry.unchecked and "..." not in example.block.text and "…" not in example.block.text:
        assert response.json() == shown  # shown whole: exactly this
    check_json_output(example, response.text, example.block.text.splitlines())


def run_target_block(example: Example) -> None:
    """Register the target with ``shuttle targets add --from-file``, read it back, remove it."""
    spec = yaml.safe_load(example.block.text)
    spec_file = example.folder / "target.yaml"
    if "name" in spec:
        spec_file.write_text(example.block.text)
    else:  # a fragment showing one mechanism's settings: it gets a name
        spec["name"] = f"doc-{spec['mechanism']}"
        spec_file.write_text(yaml.safe_dump(spec))
    env = {**example.env, "LOOM_PROJECT_ID": f"docs-{uuid.uuid4().hex[:8]}"}
    added = example.shell(f"shuttle targets add --from-file {spec_file}", env)
    assert added.returncode == 0, added.stderr
    shown = example.shell(f"shuttle targets show {spec['name']} --json", env)
    target = json.loads(shown.stdout)
    assert target["mechanism"] == spec["mechanism"] and target["name"] == spec["name"]
    config = dict(spec["config"])
    if isinstance(config.get("command"), str):
        config["command"] = config["command"].split()  # "split like a shell would"
    assert same_but_masked(target["config"], config), (target["config"], config)
    removed = example.shell(f"shuttle targets remove {spec['name']} --yes", env)
    assert removed.returncode == 0, removed.stderr


def same_but_masked(returned: Any, given: Any) -> bool:
    """Weft returns what was given, but ``***`` for the values of secret-looking keys."""
    if returned == "***":
        return True
    if isinstance(given, dict):
        return isinstance(returned, dict) and all(
            k in returned and same_but_masked(returned[k], v) for k, v in given.items()
        )
    return bool(returned == given)


def run_autonomy_block(example: Example) -> None:
    """operator.md's autonomy policy: ``weft check-autonomy`` accepts it as shown."""
    (example.folder / "autonomy.yaml").write_text(example.block.text)
    checked = example.shell("weft check-autonomy autonomy.yaml")
    assert checked.returncode == 0, checked.stderr
    shown = yaml.safe_load(example.block.text)
    printed = json.loads(checked.stdout)
    assert printed["rules"] == [{"category": None, "priority": None, **rule} for rule in shown["rules"]]
    assert {k: printed["modes"][k] for k in shown["modes"]} == shown["modes"]
    assert printed["bypass_after_s"] == shown["bypass_after_s"]


def run_policy_block(example: Example) -> None:
    policy = example.folder / "policy.yaml"
    policy.write_text(example.block.text)
    checked = example.shell("weft check-policy policy.yaml")
    assert checked.returncode == 0, checked.stderr
    shown = yaml.safe_load(example.block.text)
    printed = json.loads(checked.stdout)
    for name, rule in shown.get("boundaries", {}).items():
        for key, value in rule.items():
            assert printed["boundaries"][name][key] == value


def write_doc_policy(folder: Path) -> None:
    """weft.md's policy example, as the ``policy.yaml`` its commands name."""
    block = next(b for b in BLOCKS if b.key == ("docs/weft.md", "version: 1"))
    (folder / "policy.yaml").write_text(block.text)


def run_serve_block(example: Example) -> None:
    """``make run`` is the Makefile's ``weft serve``; each command serves until stopped."""
    lines = [c.line for c in commands(example.block.text)]
    assert lines[0].startswith("make run") and lines[0].split("# = ")[1] == ".venv/bin/weft serve"
    recipe = (REPO / "Makefile").read_text().split("\nrun: $(RUN_STAMP)\n\t")[1].split("\n")[0]
    assert recipe == "$(BIN)/weft serve"
    write_doc_policy(example.folder)
    for line in lines[1:]:  # `make run` itself is started by the README walkthrough's test
        port = free_port()
        args = example.fabric.substitute(line).replace("--port 8080", f"--port {port}").split()
        env = {}
        while "=" in args[0]:  # leading NAME=value assignments, as a shell takes them
            name, value = args.pop(0).split("=", 1)
            env[name] = value
        assert Path(args[0]).name == "weft"
        with running_weft(
            example.folder / "home", args[1:], port=port, cwd=example.folder, env=env
        ) as served:
            health = httpx.get(f"{served.url}/health").json()
            assert health["project_id"] == args[args.index("--project") + 1]
            assert "Policy      policy.yaml (2 boundary rules)" in served.banner()


def run_banner_block(example: Example) -> None:
    """A fresh ``weft serve`` prints the banner the docs show, but for ports, paths and the
    project id derived from its folder."""
    home = example.folder / "me"
    with running_weft(home, ["serve"], cwd=example.folder) as served:
        banner = served.banner().split("\n\n\n")[0]
    project = re.search(r"Project     (\S+)", banner)
    assert project is not None
    doc = example.fabric.substitute(example.block.text)
    doc = doc.replace(f"127.0.0.1:{example.fabric.port}", f"127.0.0.1:{served.port}")
    doc = doc.replace(f"127.0.0.1:{example.fabric.nats_port}", f"127.0.0.1:{served.nats_port}")
    doc = doc.replace("/home/me", str(home)).replace("3f1c9a0b7d2e4f60", project[1])
    ws_port = re.search(r"NATS \(WS\)   ws://127\.0\.0\.1:(\d+)", banner)
    assert ws_port is not None
    doc = doc.replace("ws://127.0.0.1:4223", f"ws://127.0.0.1:{ws_port[1]}")
    banner = banner.replace(f" --api-url {served.url}", "")  # Shuttle's default URL is the docs' one
    printed = [line for line in banner.splitlines() if not re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert printed[: len(doc.splitlines())] == doc.splitlines()


def run_synopsis_block(example: Example) -> None:
    """Each usage line names a real command, and each option it names is one that command
    offers in its help."""
    checks = []
    for line in example.block.text.splitlines():
        if not line.startswith("shuttle"):
            continue
        words = line.split("#")[0].split()[1:]
        path: list[str] = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z|-]*", word):
                break
            path.append(word)
        options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", line))
        checks += [(line, variant, options) for variant in expand(path)]
    for line, variant, options in checks:
        offered = shuttle_options(tuple(variant))
        assert offered is not None, f"{line}: 'shuttle {' '.join(variant)}' is not a command"
        missing = options - offered
        assert not missing, f"{line}: 'shuttle {' '.join(variant)} --help' does not offer {missing}"


def shuttle_options(path: tuple[str, ...]) -> set[str] | None:
    """The options ``shuttle <path> --help`` lists (None: no such command), read from
    Shuttle's own command tree, which its help is drawn from (Typer's Click, through its
    public methods). A synopsis names dozens of commands: starting the console script for
    each took 15 CPU-seconds a run, and its start-up is tested in tests/shuttle."""
    command: Any = typer.main.get_command(shuttle_app)
    context = command.context_class(command, info_name="shuttle")
    for word in path:
        found = command.get_command(context, word) if hasattr(command, "get_command") else None
        if found is None:
            return None
        command, context = found, found.context_class(found, info_name=word, parent=context)
    return {
        name
        for param in command.get_params(context)
        if param.param_type_name == "option" and not param.hidden
        for name in (*param.opts, *param.secondary_opts)
    }


def expand(path: list[str]) -> list[list[str]]:
    """``targets show|enable`` is two commands."""
    variants: list[list[str]] = [[]]
    for word in path:
        variants = [[*v, choice] for v in variants for choice in word.split("|")]
    return variants


class Masked:
    """Output compared after masking what changes from run to run (see the module docstring)."""

    @staticmethod
    def subsequence(actual: str, shown: list[str], where: str) -> None:
        want = normalized("\n".join(shown))
        have = [
            line
            for line in normalized(actual)
            if "work.waiting" not in line or any("waiting" in w for w in want)
        ]
        position = 0
        for line in want:
            try:
                position = have.index(line, position) + 1
            except ValueError:
                raise AssertionError(
                    f"{where}: the docs show {line!r}, which is not (in this order) in:\n" + "\n".join(have)
                ) from None


async def claim_soon(queue: WorkQueue, claimant: Claimant) -> WorkItem | None:
    """What an agent claims once the submission reached the queue (None after 5 s)."""
    for _ in range(100):
        item = await queue.claim(claimant)
        if item:
            return item
        await tick(0.05)
    return None


async def run_watch_output_block(example: Example) -> None:
    """``watch`` on an item an agent claims, reports on (50% reproduced) and completes with the
    result the example shows; the output is what the docs show."""
    project = f"docs-{uuid.uuid4().hex[:8]}"
    env = {**example.env, "LOOM_PROJECT_ID": project}
    submitted = json.loads(
        example.shell('shuttle submit "Fix the flaky login test" -c code --json', env).stdout
    )
    nc = await connect(url=example.fabric.nats_url, name="docs-agent")
    try:
        names = ProjectNames(project)
        agent_id = uuid.uuid4().hex
        await Registry(nc.jetstream(), names).put(
            AgentEntry(
                agent_id=agent_id,
                handle="agent",
                project_id=project,
                user_id="0123456789abcdef",
                capabilities=["code"],
            )
        )
        watch = await asyncio.create_subprocess_exec(
            str(BIN / "shuttle"), "watch", submitted["id"], env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert watch.stdout is not None
        heading = await asyncio.wait_for(watch.stdout.readline(), 30)
        snapshot = await asyncio.wait_for(watch.stdout.readline(), 30)
        queue = work_queue(nc, names)
        claimant = Claimant(agent_id=agent_id, agent_type="claude-code", capabilities=("code",))
        item = await claim_soon(queue, claimant)
        assert item is not None
        await queue.progress(item.id, agent_id, 50, "reproduced")
        await queue.complete(item.id, agent_id, {"commit": "abc123"})
        rest, err = await asyncio.wait_for(watch.communicate(), 30)
        assert watch.returncode == 0, err
    finally:
        await nc.close()
    printed = (heading + snapshot + rest).decode()
    Masked.subsequence(printed, example.block.text.splitlines(), example.block.where)


async def run_session_block(example: Example) -> None:
    """A ``$``-prompted session: exports carry on, ``echo $?`` shows the last exit code, and the
    output of each command is what the docs show (masked)."""
    env = {**example.env, "COLUMNS": "80"}
    for name in ("LOOM_API_URL", "LOOM_API_TOKEN", "LOOM_PROJECT_ID"):
        env.pop(name, None)
    project = f"docs-{uuid.uuid4().hex[:8]}"
    ids: dict[str, str] = {}
    last_code = 0
    for command in commands(example.block.text):
        line = example.fabric.substitute(command.line)
        for shown, real in ids.items():
            line = line.replace(shown, real)
        if line.startswith("export "):
            for assignment in line.split()[1:]:
                name, value = assignment.split("=", 1)
                env[name] = {"LOOM_API_TOKEN": TOKEN, "LOOM_PROJECT_ID": project}.get(name, value)
            continue
        if line.strip() == "echo $?":
            assert command.output == [str(last_code)], f"{command.line}: exit code {last_code}"
            continue
        result = await asyncio.to_thread(run_shell, line, env, REPO)
        last_code = result.returncode
        printed = result.stdout + result.stderr
        for shown_id, real_id in zip(
            re.findall(r"\b[0-9a-f]{32}\b", "\n".join(command.output)),
            re.findall(r"\b[0-9a-f]{32}\b", printed),
            strict=False,
        ):
            ids.setdefault(shown_id, real_id)
        Masked.subsequence(printed, command.output, f"{example.block.where}: {command.line}")


async def run_client_block(example: Example) -> None:
    """docs/client.md's program, run as written (Weft's URL substituted, a project of its
    own) while an agent claims the item it submits, reports and completes it: it prints the
    item queued, each change, and the result."""
    project = f"docs-{uuid.uuid4().hex[:8]}"
    code = example.fabric.substitute(example.block.text).replace('project="myapp"', f'project="{project}"')
    env = {**example.env, "LOOM_API_TOKEN": TOKEN}
    program = await asyncio.create_subprocess_exec(
        str(BIN / "python"), "-c", code, env=env, cwd=example.folder,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert program.stdout is not None
    first = (await asyncio.wait_for(program.stdout.readline(), 30)).decode()
    work_id, status = first.split()
    assert status == "queued", first
    snapshot = (await asyncio.wait_for(program.stdout.readline(), 30)).decode()
    assert snapshot == "snapshot queued\n", snapshot  # watching: the agent comes next
    nc = await connect(url=example.fabric.nats_url, name="docs-client-agent")
    try:
        queue = work_queue(nc, ProjectNames(project))
        agent = Claimant(agent_id=uuid.uuid4().hex, agent_type="claude-code", capabilities=("code",))
        item = await claim_soon(queue, agent)
        assert item is not None and item.id == work_id
        await queue.progress(item.id, agent.agent_id, 50, "reproduced")
        await queue.complete(item.id, agent.agent_id, {"commit": "abc123"})
        rest, err = await asyncio.wait_for(program.communicate(), 60)
    finally:
        await nc.close()
    assert program.returncode == 0, err.decode()
    lines = rest.decode().splitlines()
    assert "work.claimed claimed" in lines and "work.completed completed" in lines, lines
    assert lines[-1] == "completed {'commit': 'abc123'}"


PLAN_FILE = re.compile(r"# (?P<name>[a-z]+\.yaml)")
PLAN_OUTCOME = {"plan.yaml": "created", "cycle.yaml": "refused"}
"""What submitting each plan file the docs show must do."""


def write_plan_files(example: Example) -> dict[str, Path]:
    """Every plan file the example's document shows (a YAML block whose first line is
    ``# <name>.yaml``), written into the example's folder."""
    written = {}
    for block in BLOCKS:
        found = PLAN_FILE.match(block.text)
        if block.path == example.block.path and found:
            written[found["name"]] = example.folder / found["name"]
            written[found["name"]].write_text(block.text)
    assert set(written) == set(PLAN_OUTCOME), f"{example.block.path}: plan files {sorted(written)}"
    return written


def plan_env(example: Example) -> dict[str, str]:
    """Shuttle's environment for a plan example: a project of its own."""
    return {**example.env, "LOOM_PROJECT_ID": f"docs-{uuid.uuid4().hex[:8]}", "COLUMNS": "120"}


def run_plan_file_block(example: Example) -> None:
    """Submitting the file does what the docs say: the plan is created whole (each entry
    that comes after another blocked, the rest queued, the review kept), or the cycle is
    refused and nothing is created."""
    found = PLAN_FILE.match(example.block.text)
    assert found, example.block.where
    name = found["name"]
    path = write_plan_files(example)[name]
    env = plan_env(example)
    result = example.shell(f"shuttle submit --file {path} --json", env)
    entries = yaml.safe_load(example.block.text)
    with example.fabric.api() as api:
        listed = api.get("/api/work", headers={"X-Loom-Project": env["LOOM_PROJECT_ID"]}).json()["items"]
    if PLAN_OUTCOME[name] == "refused":  # Weft refused it: exit 1 (docs/shuttle.md, exit codes)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "the plan has a cycle" in result.stderr and "(nothing was submitted)" in result.stderr
        assert listed == []
        return
    assert result.returncode == 0, result.stdout + result.stderr
    created = json.loads(result.stdout)
    assert [i["description"] for i in created["items"]] == [e["description"] for e in entries]
    for entry, item in zip(entries, created["items"], strict=True):
        assert item["status"] == ("blocked" if entry.get("after") else "queued"), item
        assert item.get("review") == entry.get("review"), item
        if "name" in entry:
            assert created["names"][entry["name"]] == item["id"]
    assert len(listed) == len(entries)


def run_plan_session_block(example: Example) -> None:
    """The session, in a folder holding the plan files the docs show, with a project of its
    own; its output is what the docs show (masked)."""
    write_plan_files(example)
    env = plan_env(example)
    for command in commands(example.block.text):
        result = run_shell(example.fabric.substitute(command.line), env, example.folder)
        Masked.subsequence(result.stdout + result.stderr, command.output, f"{example.block.where}")


async def run_plan_graph_block(example: Example) -> None:
    """The graph of the plan's second step while an agent works on the first: submitted with
    the docs' plan.yaml, the first step claimed and reported on by an agent."""
    path = write_plan_files(example)["plan.yaml"]
    env = plan_env(example)
    created = json.loads(example.shell(f"shuttle submit --file {path} --json", env).stdout)
    first, second = created["names"]["migration"], created["names"]["api"]
    nc = await connect(url=example.fabric.nats_url, name="docs-agent")
    try:
        queue = work_queue(nc, ProjectNames(env["LOOM_PROJECT_ID"]))
        claimant = Claimant(agent_id=uuid.uuid4().hex, agent_type="claude-code", capabilities=("code",))
        item = await claim_soon(queue, claimant)
        assert item is not None and item.id == first
        await queue.progress(first, claimant.agent_id, 20, "tables")
    finally:
        await nc.close()
    command = commands(example.block.text)[0]
    assert command.line.startswith("shuttle work graph ")
    result = example.shell(f"shuttle work graph {second}", env)
    assert result.returncode == 0, result.stdout + result.stderr
    Masked.subsequence(result.stdout, command.output, example.block.where)


async def run_warp_mcp_json_block(example: Example) -> None:
    """Warp run as the snippet says, in a project folder, registers with what it sets."""
    server = json.loads(example.fabric.substitute(example.block.text))["mcpServers"]["warp"]
    assert shutil.which(server["command"], path=example.env["PATH"]) == str(BIN / "warp")
    folder = example.folder / "myrepo"
    folder.mkdir()
    env = {**example.env, **server["env"]}
    async with mcp_session(str(BIN / server["command"]), env, folder) as warp:
        entry = await call(warp, "warp_registry_register")
        assert entry["agent_type"] == server["env"]["LOOM_AGENT_TYPE"]
        assert entry["capabilities"] == server["env"]["LOOM_CAPABILITIES"].split(",")
        with example.fabric.api(entry["project_id"]) as api:
            listed = api.get(f"/api/agents/{entry['agent_id']}").json()
        assert listed["status"] == "online" and listed["agent_type"] == "claude-code"
        await call(warp, "warp_registry_deregister")


def run_warp_error_block(example: Example) -> None:
    result = example.shell("warp", {**example.env, "LOOM_CAPABILITIES": "Code Review"})
    assert result.returncode == 2 and result.stderr == example.block.text


async def run_warp_channels_block(example: Example) -> None:
    """The channel file, in a project's ``.loom/config.json``, is what Warp's channels follow."""
    folder = example.folder / "repo"
    (folder / ".loom").mkdir(parents=True)
    (folder / ".loom" / "config.json").write_text(example.block.text)
    shown = json.loads(example.block.text)["channels"]
    env = {**example.env, "NATS_URL": example.fabric.nats_url}
    async with mcp_session(str(BIN / "warp"), env, folder) as warp:
        listed = {c["name"]: c for c in (await call(warp, "warp_channels_list"))["channels"]}
    for name, settings in shown.items():
        for key, value in settings.items():
            assert listed[name][key] == value, (name, key)


async def run_channel_messages_block(example: Example) -> None:
    """A message sent with Warp, read back through Weft's channel route."""
    folder = example.folder / "repo"
    folder.mkdir()
    env = {
        **example.env,
        "NATS_URL": example.fabric.nats_url,
        "LOOM_PROJECT_ID": PROJECT,
        "LOOM_HANDLE": "alice",
    }
    async with mcp_session(str(BIN / "warp"), env, folder) as warp:
        await call(warp, "warp_channels_send", {"channel": "roadmap", "message": "Ship the parser on Friday"})
    with example.fabric.api() as api:
        response = api.get("/api/channels/roadmap/messages")
    assert response.status_code == 200
    check_json_output(example, response.text, example.block.text.splitlines())


async def run_pattern_mcp_json_block(example: Example) -> None:
    server = json.loads(example.fabric.substitute(example.block.text))["mcpServers"]["pattern"]
    folder = example.folder / "repo"
    folder.mkdir()
    env = {**example.env, **server["env"], "LOOM_PROJECT_PATH": str(folder)}
    assert server["env"]["LOOM_PROJECT_PATH"] == "/path/to/repo"  # a project folder: substituted
    async with mcp_session(str(BIN / server["command"]), env, folder) as pattern:
        stored = await call(pattern, "pattern_remember", {"content": "The docs' example works"})
        recalled = await call(pattern, "pattern_recall_context", {"limit": 5})
    assert [m["id"] for m in recalled["memories"]] == [stored["memory"]["id"]]


async def run_pattern_unreachable_block(example: Example) -> None:
    """Pattern without NATS: once its first attempt has failed, every tool says why."""
    dead = free_port()
    env = {**example.env, "NATS_URL": f"nats://127.0.0.1:{dead}"}
    folder = example.folder / "repo"
    folder.mkdir()
    shown = " ".join(example.block.text.replace("127.0.0.1:4222", f"127.0.0.1:{dead}").split())
    async with mcp_session(str(BIN / "pattern"), env, folder) as pattern:
        for _ in range(100):
            result = await pattern.call_tool("pattern_remember", {"content": "x"})
            assert result.is_error
            said = " ".join(text_of(result).split())
            if "(still connecting)" not in said:
                break
            await tick(0.1)
    assert said == shown


async def run_websocket_block(example: Example) -> None:
    """The frames of the transcript, in a session that provokes each (the server's own ``ping``
    comes every 20 s and ``lagged`` only for a reader too slow: both are left out)."""
    with example.fabric.api() as api:
        item = api.post("/api/work", json={"task_id": "ws", "description": "d", "capability": "code"}).json()
    url = example.fabric.url.replace("http://", "ws://") + "/api/ws"
    lines = example.block.text.splitlines()
    sent = [
        shown_json(re.sub(r"(?<=\})\s+\(.*$", "", line[2:].split("←")[0]))
        for line in lines
        if line.startswith("→")
    ]
    received = [
        shown_json(re.sub(r"(?<=\})\s+\(.*$", "", line.split("← ", 1)[1])) for line in lines if "← " in line
    ]
    async with ws_connect(url, subprotocols=["bearer", TOKEN]) as ws:

        async def frame(kind: str) -> dict[str, Any]:
            while True:
                got: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 15))
                if got["type"] == kind:
                    return got

        subscribe = {**sent[0], "filters": {"work_id": item["id"]}}
        await ws.send(json.dumps(subscribe))
        assert not mismatches(await frame("subscribed"), received[0], example.entry.unchecked)
        with example.fabric.api() as api:
            api.post(f"/api/work/{item['id']}/cancel")
        event = await frame("event")
        assert (
            not mismatches(event, received[1], example.entry.unchecked)
            and event["event"]["subject_id"] == item["id"]
        )
        await ws.send(json.dumps(sent[1]))  # unsubscribe
        await ws.send(json.dumps(sent[2]))  # ping
        assert not mismatches(await frame("pong"), received[2], example.entry.unchecked)
        await ws.send(
            json.dumps({"type": "subscribe", "topic": "stats", "id": "s1", "filters": {"interval_s": 1}})
        )
        assert not mismatches(await frame("stats"), received[4], example.entry.unchecked)
        await ws.send(json.dumps({"type": "subscribe", "topic": "work", "filters": {"colour": "red"}}))
        assert not mismatches(await frame("error"), received[6], example.entry.unchecked)


_pattern_replays: dict[str, asyncio.Task[Outcome]] = {}


async def run_pattern_session_block(example: Example) -> None:
    """One replay of pattern.md's tool examples (pattern_transcript.py) serves every block
    of it; each block's test reports what differed in that block."""
    replay_task = _pattern_replays.get(example.fabric.url)
    if replay_task is None:
        replay_task = asyncio.create_task(_replay_pattern(example.fabric, example.folder))
        _pattern_replays[example.fabric.url] = replay_task
    outcome = await asyncio.shield(replay_task)
    problems = outcome.problems.get(example.block, [])
    assert not problems, f"{example.block.where}:\n" + "\n".join(problems)


async def _replay_pattern(fabric: Fabric, folder: Path) -> Outcome:
    env = {
        **fabric.env,
        "NATS_URL": fabric.nats_url,
        "LOOM_PROJECT_ID": "my-app",
        "LOOM_PROJECT_PATH": str(folder),
        "LOOM_HANDLE": "laptop-my-app",
    }
    replayed = run("pattern-session")
    blocks = [b for b in BLOCKS if b.path == "docs/pattern.md" and entry_for(b) == replayed]
    async with mcp_session(str(BIN / "pattern"), env, folder) as pattern:
        health: dict[str, Any] = {}
        for _ in range(100):  # until Pattern is on NATS and has read its index
            health = await call(pattern, "pattern_health")
            if health.get("index_ready"):
                break
            await tick(0.1)
        user = health["identity"]["user_id"]

        def substitute(text: str) -> str:
            text = fabric.substitute(text).replace("/repo/", f"{folder}/")
            return text.replace(DOC_USER_ID, user)

        return await replay(pattern, blocks, folder, substitute)


DOC_USER_ID = "5a4b3c2d1e0f9a8b"
"""The user id pattern.md's examples show (derived from the user; the session's differs)."""


SHARED = {"pattern-session"}

RUNNERS: dict[str, Callable[[Example], Awaitable[None]] | Callable[[Example], None]] = {
    "pattern-session": run_pattern_session_block,
    "shell": run_shell_block,
    "agents": run_agents_block,
    "response": run_response_block,
    "target": run_target_block,
    "policy": run_policy_block,
    "autonomy": run_autonomy_block,
    "serve": run_serve_block,
    "banner": run_banner_block,
    "synopsis": run_synopsis_block,
    "watch-output": run_watch_output_block,
    "session": run_session_block,
    "plan-file": run_plan_file_block,
    "plan-session": run_plan_session_block,
    "plan-graph": run_plan_graph_block,
    "warp-mcp-json": run_warp_mcp_json_block,
    "warp-error": run_warp_error_block,
    "warp-channels": run_warp_channels_block,
    "channel-messages": run_channel_messages_block,
    "pattern-mcp-json": run_pattern_mcp_json_block,
    "pattern-unreachable": run_pattern_unreachable_block,
    "websocket": run_websocket_block,
    "client": run_client_block,
}
