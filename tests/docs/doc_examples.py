"""Every fenced code block of README.md and docs/*.md, and what the tests do with it.

:data:`EXAMPLES` is the one table: each block is either run by a test (:class:`Run`,
naming how) or listed as not run, with the reason (:class:`Skip`). A block is known by its
file and the first :data:`KEY_CHARS` characters of its first line with a letter or digit,
so editing elsewhere in a file does not disturb the table; blocks sharing a key share its
entry. :data:`SECTIONS` classifies, by heading, the blocks of a section that one runner
takes whole (pattern.md's tool examples). A block in neither fails
test_doc_examples.py::test_every_block_is_classified with the entry to add.
``python tests/docs/doc_examples.py`` prints the counts and the reasons.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEY_CHARS = 60
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: str
    """Relative to the repository root, e.g. ``docs/weft.md``."""
    line: int
    """Line of the opening fence (1-based)."""
    info: str
    text: str
    """The content, without the fence's indentation."""
    heading: str
    """The nearest heading above it."""

    @property
    def key(self) -> tuple[str, str]:
        """The file and the block's first line with a letter or digit in it (a JSON block's
        opening ``{`` says nothing), cut to :data:`KEY_CHARS`."""
        lines = [line.strip() for line in self.text.splitlines() if line.strip()]
        first = next((line for line in lines if re.search(r"\w", line)), lines[0] if lines else "")
        return (self.path, first[:KEY_CHARS])

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def extract(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order (indented fences in lists too)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(REPO).as_posix()
    blocks: list[Block] = []
    heading = ""
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            title = HEADING.match(lines[i])
            if title:
                heading = title["title"]
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : j]
        ]
        blocks.append(Block(rel, i + 1, opening["info"].strip(), "\n".join(body) + "\n", heading))
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in extract(path)]


@dataclass(frozen=True)
class Run:
    """Run by a test: ``how`` names the runner in test_doc_examples.py (``walkthrough``: in
    order by test_doc_walkthrough.py). ``unchecked``: keys of shown JSON output whose values
    are not compared because they depend on time or on what else the fabric holds."""

    how: str
    unchecked: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Skip:
    """Not run, and why."""

    why: str


def run(how: str, *unchecked: str) -> Run:
    return Run(how, frozenset(unchecked))


# Reasons shared by several blocks.
TOOL_TRANSCRIPT = (
    "an MCP tool-call transcript that follows two agents (alice, and bob who claims and reads "
    "what alice sent) through states one session cannot show in order (a Warp not yet on NATS); "
    "not replayed, but held against a real Warp's tools/list: every tool, argument and result "
    "field it names is checked (test_warp_transcripts_agree_with_the_tools_warp_publishes)"
)
PATTERN_TRANSCRIPT = (
    "a step of an MCP tool-call transcript (arguments or answers of one Pattern session), not a command"
)

BUILD_CONTEXT = (
    "a context build for a work item with two attempts and a sub-agent's parent: the replayed"
    " session has neither; tests/pattern/test_pattern_build.py builds one and scenario 24 checks"
    " the inherited layer"
)

DOCKER = "needs Docker (tests/deploy builds no image; it lints the Dockerfiles and compose file)"

EXAMPLES: dict[tuple[str, str], Run | Skip] = {
    # README.md
    ("README.md", "make run    # embedded nats-server (JetStream) + Weft, in th"): Skip(
        "`make test` is the suite this test is part of; `make run` is run as the walkthrough's step 1"
    ),
    ("README.md", "make run"): run("walkthrough"),
    ("README.md", ".venv/bin/shuttle targets add demo -m local -c code --idle-t"): run("walkthrough"),
    ("README.md", "/plugin marketplace add /path/to/loom"): run("walkthrough"),
    ("README.md", '"mcpServers": {'): run("walkthrough"),
    ("README.md", ".venv/bin/shuttle targets remove demo --yes"): run("walkthrough"),
    # docs/client.md
    ("docs/client.md", "import os"): run("client"),
    # docs/hosts.md
    ("docs/hosts.md", "uv tool install loom-fabric        # or, from a checkout of "): Skip(
        "installs Loom as an application from PyPI; tests/plugins find the test's own installation "
        "through the launcher's other ways (LOOM_BIN, LOOM_HOME, PATH)"
    ),
    ("docs/hosts.md", '{"env": {"NATS_URL": "nats://127.0.0.1:4222", "LOOM_PROJECT_'): Skip(
        "a Claude Code settings file: the walkthrough (README step 3) passes the same env to the "
        "installed plugin's server"
    ),
    ("docs/hosts.md", "loom: Loom is not installed here: no `warp` command in LOOM_"): Skip(
        "the launcher's output: tests/plugins/test_plugin_runtime.py checks it"
    ),
    # docs/architecture.md
    ("docs/architecture.md", "shuttle (CLI) ──HTTP/WS──► weft (FastAPI) ─┐"): Skip("a diagram, not code"),
    ("docs/workstreams.md", "claim ──► open: one fetch (the target, the item's branch and"): Skip(
        "a diagram, not code"
    ),
    ("docs/architecture.md", "default:                      # applies to boundaries withou"): run("policy"),
    ("docs/landing.md", "in-progress ──complete──┐"): Skip("a diagram, not code"),
    ("docs/landing.md", "Land this? fix-login: make the login form accept e-mail addr"): Skip(
        "what a question looks like, ids shortened: tests/warp/test_lander.py checks the real text"
    ),
    ("docs/landing.md", "LOOM_PROJECT_ID=myapp NATS_URL=nats://127.0.0.1:4222 loom-la"): Skip(
        "a lander runs until stopped, against a running fabric; tests/warp/test_lander.py runs landers"
    ),
    # docs/deploy.md
    ("docs/deploy.md", "docker build -f deploy/docker/weft.Dockerfile  -t registry.e"): Skip(DOCKER),
    ("docs/deploy.md", "FROM registry.example.com/loom/agent:0.1.0"): Skip(
        "a Dockerfile for an image of your own, FROM an image in your registry: " + DOCKER
    ),
    ("docs/deploy.md", "docker compose -f deploy/docker/compose.yaml up --build"): Skip(DOCKER),
    ("docs/deploy.md", "weft nats-auth init ./loom-nats          # issuer.json (a se"): Skip(
        "needs a Kubernetes cluster for the kubectl lines (tests/deploy validates the manifests"
        " offline; tests/weft/test_weft_scoped_nats.py runs weft nats-auth init)"
    ),
    ("docs/a2a.md", '"""Hand work to a Loom fleet from any A2A client: the a2a-sd'): Skip(
        "the file docs/examples/a2a_client.py verbatim: tests/weft/test_weft_a2a.py checks the doc shows"
        " it and runs it against a real Weft while an agent completes the task"
    ),
    ("docs/a2a.md", "WEFT_URL=http://127.0.0.1:8080 WEFT_TOKEN=tok LOOM_PROJECT_I"): Skip(
        "the command tests/weft/test_weft_a2a.py runs (with its Weft's URL, token and project) and"
        " the lines it checks: first submitted, then the result, last completed"
    ),
    ("docs/context.md", 'curl -s -X POST "$W/api/contexts" -H \'content-type: applicat'): Skip(
        "a tree started and grown over REST with its fresh ids: tests/weft/test_weft_contexts.py does"
        " the same calls"
    ),
    ("docs/weft.md", 'curl -H "$H" "$W/api/contexts/5c1f.../structure"     # a wor'): Skip(
        "names a work item's tree by its id: tests/weft/test_weft_contexts.py reads structures, paths"
        " and nodes"
    ),
    ("docs/shuttle.md", "shuttle context show TREE_ID [--limit N] [--json]"): run("synopsis"),
    ("docs/shuttle.md", "$ shuttle context show 5c1f0e..."): Skip(
        "a work tree of two attempts, with its ids and times: tests/shuttle/test_shuttle_context.py draws one"
    ),
    ("docs/warp.md", '→ warp_channels_send {"channel": "roadmap", "message": "Yes '): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_channels_thread {"channel": "roadmap", "seq": 3}'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_context_create {"title": "parser plan", "text": "rewr'): Skip(TOOL_TRANSCRIPT),
    ("docs/pattern.md", '{"budget_tokens": 2000, "work_id": "5c1f0e8a2b7d4c19a0e3f6b8'): Skip(BUILD_CONTEXT),
    ("docs/pattern.md", "Context: 412 of 2000 tokens (tiktoken 0.14.0 cl100k_base (vo"): Skip(BUILD_CONTEXT),
    ("docs/pattern.md", '{"counter": "tiktoken 0.14.0 cl100k_base (vocabulary from ti'): Skip(BUILD_CONTEXT),
    ("docs/architecture.md", "main line      queued ──claim──► claimed ──progress──► in-pr"): Skip(
        "a diagram, not code"
    ),
    ("docs/shuttle.md", "# plan.yaml"): run("plan-file"),
    ("docs/shuttle.md", "# cycle.yaml: each entry waits for the other, so neither cou"): run("plan-file"),
    ("docs/shuttle.md", "$ shuttle submit --file plan.yaml"): run("plan-session"),
    ("docs/shuttle.md", "$ shuttle work graph 4c5d..."): run("plan-graph"),
    ("docs/shuttle.md", "shuttle questions [--status open|answered|expired|logged|all"): run("synopsis"),
    ("docs/shuttle.md", "shuttle autonomy show [--json]"): run("synopsis"),
    ("docs/shuttle.md", "shuttle notify list [--json] [-q]"): run("synopsis"),
    ("docs/shuttle.md", "$ shuttle questions"): Skip(
        "needs an agent to have asked: tests/shuttle/test_shuttle_questions.py lists and answers one"
    ),
    ("docs/shuttle.md", "$ shuttle work show same-0"): Skip(
        "needs two items with one task id: tests/shuttle/test_shuttle_refs.py is refused the same way"
    ),
    ("docs/shuttle.md", "14:25:02  work.waiting-on-operator waiting-on-operator  ques"): Skip(
        "needs an agent's question: tests/shuttle/test_shuttle_questions.py watches an item wait on one"
    ),
    ("docs/warp.md", '→ warp_question_ask {"question": "postgres or sqlite for the'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_work_broadcast {"description": "the parser", "capabil'): Skip(TOOL_TRANSCRIPT),
    ("docs/weft.md", "curl -H \"$H\" -H 'Content-Type: application/json' $W/api/work"): Skip(
        "names the id of earlier work: tests/weft/test_weft_graph.py submits with depends_on and checks"
        " both answers"
    ),
    ("docs/weft.md", 'curl $W/api/work/plan -H "$H" -H \'Content-Type: application/'): Skip(
        "answers with fresh ids: tests/weft/test_weft_graph.py submits plans and refuses a cycle"
    ),
    ("docs/weft.md", '{"root":"2b..","truncated":false,'): Skip(
        "a running plan's ids and states: tests/weft/test_weft_graph.py reads a graph"
    ),
    ("docs/leases.md", "patterns: held by another agent: src/api/users.py overlaps s"): Skip(
        "the refusal of a conflicting acquire: tests/shared/test_leases.py checks every part it"
        " shows (holder handle and id, work, patterns, expiry, lease id, a shared path)"
    ),
    ("docs/leases.md", "shuttle leases install-hook            # or: --repo PATH; --"): Skip(
        "installs the hook in the current repository: tests/shuttle/test_shuttle_leases.py installs"
        " it in real repositories and commits as LOOM_AGENT_ID (an id, and a handle)"
    ),
    ("docs/leases.md", "loom-guard: commit refused: 1 path(s) leased by other agents"): Skip(
        "a refused commit: tests/shuttle/test_shuttle_leases.py refuses one and checks each field shown"
    ),
    ("docs/shuttle.md", "shuttle leases [--holder AGENT_ID] [--work-id ID] [--path P]"): run("synopsis"),
    ("docs/operations.md", "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"): Skip(
        "needs a collector on port 4318: tests/weft/test_weft_otlp.py sets the variable for a real"
        " Weft, Warp and Shuttle and checks the one trace they export to a receiver it runs"
    ),
    ("docs/operations.md", "trace e807ff4b96bb4d09aa691ba4557510f0"): Skip(
        "a waterfall of one run's times: tests/weft/test_weft_traces.py draws one with shuttle work"
        " trace and checks the spans, processes and transitions it shows"
    ),
    ("docs/warp.md", '→ warp_lease_acquire {"patterns": ["src/api/**"], "reason": '): Skip(TOOL_TRANSCRIPT),
    ("docs/operator.md", "modes:            # each priority's mode; one left out keeps"): run("autonomy"),
    ("docs/operator.md", '$ shuttle answer 9f3e... sqlite 41aa... yes 0c7d... "not thi'): Skip(
        "needs open questions: tests/shuttle/test_shuttle_questions.py answers several in one call,"
        " one refused, and checks the summary line shown"
    ),
    ("docs/operator.md", '$ shuttle notify set pager "ntfy://ntfy.example.com/loom-ops'): Skip(
        "needs ntfy and Slack: tests/shuttle/test_shuttle_notify.py sets sinks (one from stdin) with"
        " --test against a receiver and checks the lines shown"
    ),
    ("docs/operator.md", '{"kind": "question", "priority": "P0", "title": "[P0] laptop'): Skip(
        "ids and times of one run: tests/weft/test_weft_notify.py checks each field of the signed"
        " payload and its signature"
    ),
    ("docs/weft.md", 'curl -H "$H" "$W/api/questions?status=open"'): Skip(
        "needs an agent to have asked: tests/weft/test_weft_questions.py lists and answers questions"
    ),
    ("docs/weft.md", 'curl $W/api/questions/9f3e.../answer -H "$H" -H \'Content-Typ'): Skip(
        "needs an open question: tests/weft/test_weft_questions.py refuses both answers shown"
    ),
    ("docs/weft.md", '{"error": "forbidden", "message": "scope: this needs a token'): Skip(
        "needs a second, read-only token: tests/weft/test_weft_scopes.py checks this answer word for"
        " word for every route"
    ),
    ("docs/weft.md", '{"project_id":"demo","agent_id":"5a9c...","user_key":"UBK7..'): Skip(
        "needs Weft in scoped NATS mode (its own operator): tests/weft/test_weft_scoped_nats.py mints"
        " credentials through this route and uses them against a real server"
    ),
    ("docs/deploy.md", '"name": "k8s-coder",'): run("target"),
    ("docs/deploy.md", '{"name": "gha-coder", "agent_type": "claude-code", "capabili'): run("target"),
    # docs/pattern.md
    ("docs/pattern.md", '{ "mcpServers": { "pattern": { "command": "pattern",'): run("pattern-mcp-json"),
    ("docs/pattern.md", "Pattern is not connected to NATS at nats://127.0.0.1:4222:"): run(
        "pattern-unreachable"
    ),
    ("docs/pattern.md", "content: possible connection string with credentials at char"): run(
        "pattern-session"
    ),
    ("docs/pattern.md", "from pattern.config import PatternConfig"): Skip(
        "a fragment of Warp's own start-up (warp/server.py mounts Pattern this way), with `...` elisions"
    ),
    ("docs/pattern.md", '{ "id": "55a7c286d3274ba281e2bb269e61acf1", "scope": "privat'): run(
        "pattern-session"
    ),
    # docs/performance.md
    ("docs/performance.md", "make bench                                   # every bench_*"): Skip(
        "the performance suite runs for minutes; `make test` runs its --quick form (tests/perf)"
    ),
    # docs/testing.md
    ("docs/testing.md", "make test                                    # everything, p"): Skip(
        "the suite's own commands: `make test` is the run this test is part of"
    ),
    ("docs/testing.md", ".venv/bin/pytest -n 4 --dist loadgroup --durations=25 -q   #"): Skip(
        "the suite's own commands: `make test` is the run this test is part of"
    ),
    # docs/shuttle.md
    ("docs/shuttle.md", "shuttle [GLOBAL OPTIONS] COMMAND [ARGS] [OPTIONS]"): run("synopsis"),
    ("docs/shuttle.md", "shuttle config path                         # which file is "): run("shell"),
    ("docs/shuttle.md", "shuttle submit DESCRIPTION -c CAPABILITY [options]"): run("synopsis"),
    ("docs/shuttle.md", "4e12208673954d11a954aab09217a940  shuttle-692a0b1c3d4e  Fix "): run("watch-output"),
    ("docs/shuttle.md", "shuttle agents list [--type T] [--status online|busy|offline"): run("synopsis"),
    ("docs/shuttle.md", "shuttle work list [--status S] [--capability C] [--boundary "): run("synopsis"),
    ("docs/shuttle.md", "shuttle targets mechanisms"): run("synopsis"),
    ("docs/shuttle.md", "shuttle dlq list [--limit N] [--cursor C] [--all] [--json] ["): run("synopsis"),
    ("docs/shuttle.md", "shuttle --install-completion      # bash, zsh, fish or Power"): run("shell"),
    ("docs/shuttle.md", "$ export LOOM_API_URL=http://127.0.0.1:8080 LOOM_API_TOKEN=."): run("session"),
    # docs/spinup.md
    ("docs/spinup.md", "name: laptop"): run("target"),
    ("docs/spinup.md", "mechanism: ssh"): run("target"),
    ("docs/spinup.md", "mechanism: kubernetes"): run("target"),
    ("docs/spinup.md", "mechanism: github-actions"): run("target"),
    ("docs/spinup.md", "mechanism: webhook"): run("target"),
    # docs/warp.md
    ("docs/warp.md", '"mcpServers": {'): run("warp-mcp-json"),
    ("docs/warp.md", "warp: LOOM_CAPABILITIES: each comma-separated value must be "): run("warp-error"),
    ("docs/warp.md", "→ warp_handle_get {}"): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", "warp --zygote /run/user/$UID/loom-warp.sock &     # imports "): Skip(
        "starts a long-lived zygote and an agent; tests/warp/test_zygote.py runs the same commands"
    ),
    ("docs/pattern.md", "pattern --zygote /run/user/$UID/loom-pattern.sock &     # im"): Skip(
        "starts a long-lived zygote and a Pattern; tests/pattern/test_pattern_zygote.py runs the same"
    ),
    ("docs/shuttle.md", "shuttle --zygote /run/user/$UID/loom-shuttle.sock &     # im"): Skip(
        "starts a long-lived zygote; tests/shuttle/test_shuttle_zygote.py runs the same commands"
    ),
    ("docs/weft.md", "weft --zygote /run/user/$UID/loom-weft.sock &     # imports "): Skip(
        "starts a long-lived zygote and a Weft; tests/weft/test_weft_zygote.py runs the same commands"
    ),
    ("docs/warp.md", '→ warp_registry_register {"capabilities": ["code", "review"]'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_registry_discover {"capability": "code", "status": "o'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_registry_get_info {"agent_id": "7b1e0c9d8a6f4e2d9c3b5'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_registry_update_presence {"status": "busy", "note": "'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", "→ warp_registry_deregister {}"): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", "→ warp_channels_list {}"): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_channels_send {"channel": "parallel-work", "message":'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_channels_read {"channel": "parallel-work", "limit": 2'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_messages_send_direct {"recipient_id": "7b1e0c9d8a6f4e'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_messages_read_direct {"limit": 10}'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_work_broadcast {"description": "Add tests for the tok'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", "→ warp_work_claim {}"): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_work_progress {"work_id": "a9109b81…", "percent": 50,'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_work_complete {"work_id": "a9109b81…", "result": "bui'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '→ warp_work_list {"limit": 2}            (filters: status, c'): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", "→ warp_dlq_list {}                        (capability, limit"): Skip(TOOL_TRANSCRIPT),
    ("docs/warp.md", '"channels": {'): run("warp-channels"),
    # docs/weft.md
    ("docs/weft.md", "make run                      # = .venv/bin/weft serve"): run("serve"),
    ("docs/weft.md", "Weft 0.1.0 - Loom coordinator"): run("banner"),
    ("docs/weft.md", '{"error": "unauthorized", "message": "a bearer token is requ'): run("response"),
    ("docs/weft.md", '{"error": "invalid_project", "message": "project: must be lo'): run("response"),
    ("docs/weft.md", "curl $W/health"): run("shell", "uptime_s", "projects_served"),
    ("docs/weft.md", "curl -H \"$H\" -H 'X-Loom-Project: demo' -H 'Content-Type: app"): run("shell"),
    ("docs/weft.md", 'curl -H "$H" "$W/api/work?status=claimed&capability=code&lim'): run(
        "shell", "total", "next_cursor"
    ),
    ("docs/weft.md", '{"results":[{"id":"5c1f...","ok":true,"status":"cancelled","'): run("response"),
    ("docs/weft.md", 'curl -H "$H" "$W/api/agents?status=online&capability=code"'): run("agents"),
    ("docs/weft.md", "curl -H \"$H\" -H 'Content-Type: application/json' $W/api/targ"): run("shell"),
    ("docs/weft.md", '{"project_id":"demo",'): run(
        "response",
        "total",
        "by_status",
        "by_type",
        "waiting_for_agent",
        "queue_depths",
        "dead_letters",
        "enabled",
        "by_health",
        "by_mechanism",
        "by_state",
    ),
    ("docs/weft.md", '{"channel":"roadmap","items":[{"seq":11,"stored_at":"...","m'): run(
        "channel-messages", "seq", "body", "sender_handle"
    ),
    ("docs/weft.md", '→ {"type": "subscribe", "topic": "work", "filters": {"work_i'): run("websocket", "seq"),
    ("docs/weft.md", "version: 1"): run("policy"),
}
"""Every block's classification, file by file in the files' order."""


SECTIONS: dict[tuple[str, str], Run | Skip] = {
    # every call and answer under a `### pattern_<tool>` heading: replayed as one session
    ("docs/pattern.md", "pattern_"): run("pattern-session"),
}
"""Blocks without an entry of their own, by file and the start of the heading they are under:
for runners that take every block of a section (a new block there is run by them too)."""


def entry_for(block: Block) -> Run | Skip | None:
    entry = EXAMPLES.get(block.key)
    if entry is not None:
        return entry
    for (path, heading), section_entry in SECTIONS.items():
        if block.path == path and block.heading.startswith(heading):
            return section_entry
    return None


def unclassified_message(block: Block) -> str:
    path, opening = block.key
    return (
        f"{block.where}: this ```{block.info or ''} block (under '{block.heading}') is not "
        "classified. Add it to EXAMPLES in tests/docs/doc_examples.py, either run by a test or "
        f'not run with the reason:\n    ({path!r}, {opening!r}): run("...") or Skip("..."),'
    )


def classify(blocks: list[Block]) -> tuple[dict[Block, Run | Skip], list[str]]:
    """Each block's entry, and the problems: blocks without an entry, entries without a block."""
    found: dict[Block, Run | Skip] = {}
    problems = []
    for block in blocks:
        entry = entry_for(block)
        if entry is None:
            problems.append(unclassified_message(block))
        else:
            found[block] = entry
    keys = {block.key for block in blocks}
    for path, heading in SECTIONS:
        if not any(b.path == path and b.heading.startswith(heading) for b in blocks):
            problems.append(
                f"SECTIONS in tests/docs/doc_examples.py names {(path, heading)!r}, under which "
                "no block is any more: update or remove it."
            )
    for key in EXAMPLES:
        if key not in keys:
            problems.append(
                f"EXAMPLES in tests/docs/doc_examples.py names {key!r}, which no block starts with any "
                "more: the example changed or went; update or remove its entry."
            )
    return found, problems


def summary(blocks: list[Block]) -> str:
    found, problems = classify(blocks)
    ran = Counter(b.path for b, e in found.items() if isinstance(e, Run))
    skipped = Counter(b.path for b, e in found.items() if isinstance(e, Skip))
    lines = [f"{'file':<24} {'blocks':>6} {'run':>4} {'not run':>8}"]
    for path in dict.fromkeys(b.path for b in blocks):
        total = sum(1 for b in blocks if b.path == path)
        lines.append(f"{path:<24} {total:>6} {ran[path]:>4} {skipped[path]:>8}")
    lines.append(f"{'all':<24} {len(blocks):>6} {sum(ran.values()):>4} {sum(skipped.values()):>8}")
    lines.append("")
    lines.append("not run:")
    for block, entry in found.items():
        if isinstance(entry, Skip):
            lines.append(f"  {block.where} ({block.key[1][:40]}): {entry.why}")
    lines += problems
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(summary(all_blocks()) + "\n")
