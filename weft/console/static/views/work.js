// Work: every item, filtered by status, capability, boundary and priority, searched by text;
// an item's detail (history as its context tree, attempts and their errors, progress, result,
// its work graph, its trace as a waterfall) with cancel and retry.

import { FINAL } from "../store.js";
import { Pager, confirmButton, fillOptions, gist, h, keepFocus, patch, replace, select, short, statusText, table, tags, time, when } from "../dom.js";

const STATUSES = ["submitted", "blocked", "queued", "claimed", "in-progress", "waiting-on-operator", "in-review", "reviewing", "landing", "merging", "completed", "failed", "cancelled", "expired", "dead-lettered"];
const state = { status: "", capability: "", boundary: "", priority: "", search: "" };

export function workView(ctx) {
  const { store } = ctx;
  const pager = new Pager("Work");
  const refilter = (key) => (value) => {
    state[key] = value;
    pager.page = 0;
    update();
  };
  const status = select("work-status", "Status", [["", "any"], ...STATUSES.map((s) => [s, s])], state.status, refilter("status"));
  const capability = select("work-capability", "Capability", [["", "any"]], state.capability, refilter("capability"));
  const boundary = select("work-boundary", "Boundary", [["", "any"]], state.boundary, refilter("boundary"));
  const priority = select("work-priority", "Priority", [["", "any"], ...[10, 9, 8, 7, 6, 5, 4, 3, 2, 1].map((p) => [String(p), String(p)])], state.priority, refilter("priority"));
  const search = h("input", { id: "work-search", type: "search", value: state.search, placeholder: "task, description, id" });
  search.addEventListener("input", () => refilter("search")(search.value.trim().toLowerCase()));
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter work", onsubmit: (e) => e.preventDefault() },
    status.wrap, capability.wrap, boundary.wrap, priority.wrap, h("div", null, h("label", { for: "work-search" }, "Search"), search));
  const list = table("Work items, newest first", ["Task", "Description", "Status", "Capability", "Boundary", "Priority", "Attempts", "Assigned to", "Updated"]);
  list.el.id = "work-items";
  pager.onchange = () => update();
  const loading = h("p", { class: "note" }, "Reading the work records…");
  const el = h("div", null, filters, loading, list.el, pager.el);
  let capsSeen = "";

  function update() {
    const now = Date.now();
    const items = store.workNewestFirst();
    const caps = new Set();
    const bounds = new Set();
    for (const item of store.work.values()) {
      caps.add(item.capability);
      bounds.add(item.boundary);
    }
    const key = `${[...caps].sort()}|${[...bounds].sort()}`;
    if (key !== capsSeen) {
      capsSeen = key;
      fillOptions(capability.el, [["", "any"], ...[...caps].sort().map((c) => [c, c])], state.capability);
      fillOptions(boundary.el, [["", "any"], ...[...bounds].sort().map((b) => [b, b])], state.boundary);
    }
    loading.hidden = store.loaded.work;
    const wanted = items.filter((item) =>
      (!state.status || item.status === state.status) &&
      (!state.capability || item.capability === state.capability) &&
      (!state.boundary || item.boundary === state.boundary) &&
      (!state.priority || String(item.priority) === state.priority) &&
      (!state.search || item.task_id.toLowerCase().includes(state.search) || item.id.startsWith(state.search) ||
        item.description.toLowerCase().includes(state.search)));
    const page = pager.slice(wanted, "items");
    keepFocus(list.tbody, () => patch(list.tbody, page.length === 0
      ? h("tr", null, h("td", { colspan: 9, class: "note" }, store.work.size === 0 ? "No work in this project." : "No item matches."))
      : page.map((item) => h("tr", { dataset: { workId: item.id } },
      h("th", { scope: "row" }, h("a", { href: `#work/${item.id}`, title: item.description.slice(0, 200), dataset: { focusKey: `work:${item.id}` } }, item.task_id)),
      h("td", { class: "work-desc" }, gist(item.description)),
      h("td", { class: "work-status" }, statusText(item.status)),
      h("td", null, item.capability),
      h("td", null, item.boundary),
      h("td", { class: "num" }, item.priority),
      h("td", { class: "num" }, `${item.attempts}/${item.max_attempts}`),
      h("td", null, item.assigned_to ? store.handleOf(item.assigned_to) : "-"),
      h("td", null, time(item.updated_at, now))))));
  }

  return { el, update };
}

export function workItemView(ctx, workId) {
  const { store, api } = ctx;
  const summary = h("div");
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Actions" });
  const history = h("div");
  const graph = h("div");
  const trace = h("div", { id: "work-trace" });
  const code = h("div", { id: "work-code" });
  const el = h("div", null,
    h("p", null, h("a", { href: "#work" }, "← all work")),
    actions, summary,
    graph,
    code,
    h("h3", null, "Trace"), trace,
    h("h3", null, "History (context tree)"), history);
  const view = { el, update, title: "Work item", destroy: () => clearTimeout(timer) };
  let shownRev = -1;
  let timer = null;
  let missing = false;

  async function fetchItem() {
    try {
      store.upsertWork(await api.get(`/api/work/${workId}`));
    } catch (error) {
      missing = true;
      replace(summary, h("p", { class: "error" }, error.message));
    }
  }

  async function fetchMore() {
    const item = store.work.get(workId);
    if (item && item.workstream) {
      api.get(`/api/work/${workId}/diff`)
        .then((doc) => replace(code, renderCode(item.workstream, doc)))
        .catch((error) => replace(code, renderCode(item.workstream, null, error.message)));
    }
    const [tree, deps, spans, jams] = await Promise.allSettled([
      api.get(`/api/contexts/${workId}/nodes`, { limit: 500 }),
      api.get(`/api/work/${workId}/graph`),
      api.get(`/api/work/${workId}/trace`),
      api.get("/api/work/bottlenecks"),
    ]);
    if (spans.status === "fulfilled") replace(trace, renderTrace(spans.value, (id) => store.agents.get(id)?.handle ?? id));
    else replace(trace, h("p", { class: "note" }, `No trace: ${spans.reason.message}`));
    if (tree.status === "fulfilled") replace(history, renderTree(tree.value.items, (id) => store.agents.get(id)?.handle ?? id));
    else replace(history, h("p", { class: "note" }, `No history: ${tree.reason.message}`));
    const heldUp = new Map(jams.status === "fulfilled" ? jams.value.items.map((b) => [b.item.id, b.held_up]) : []);
    if (deps.status === "fulfilled") replace(graph, renderGraph(deps.value, heldUp));
    else replace(graph, h("p", { class: "note" }, deps.reason.message));
  }

  function update() {
    const item = store.work.get(workId);
    if (!item) {
      if (!missing) replace(summary, h("p", { class: "note" }, "Reading the item…"));
      return;
    }
    const rev = `${item.updated_at}|${item.status}`;
    if (rev === shownRev) return;
    shownRev = rev;
    renderItem(item);
    clearTimeout(timer);
    timer = setTimeout(fetchMore, 150); // an item's events come in bursts: read its tree once after
  }

  function renderItem(item) {
    const heading = document.getElementById("view-title");
    if (heading) heading.textContent = `Work item ${item.task_id}`;
    const canCancel = !FINAL.has(item.status) && item.status !== "failed";
    const canRetry = item.status === "failed" || item.status === "dead-lettered";
    keepFocus(actions, () => patch(actions,
      canCancel ? confirmButton("Cancel", "Confirm cancel", () => ctx.act(() => api.post(`/api/work/${item.id}/cancel`, { reason: "cancelled from the console" }), `Cancelled ${item.task_id}`), `cancel:${item.id}`) : null,
      canRetry ? h("button", { type: "button", dataset: { focusKey: `retry:${item.id}` }, onclick: () => ctx.act(() => api.post(`/api/work/${item.id}/retry`), `Retried ${item.task_id}`) }, "Retry") : null,
      item.question_id ? h("a", { href: "#questions" }, "Answer its question") : null));
    const progress = item.progress
      ? h("div", null, h("progress", { max: 100, value: item.progress.percent, "aria-label": "Progress" }), ` ${item.progress.percent}% ${item.progress.note || ""}`)
      : "-";
    replace(summary,
      h("dl", { class: "fields", id: "work-fields" },
        field("Id", h("code", null, item.id)),
        field("Task", item.task_id),
        field("Status", h("span", { id: "work-status" }, statusText(item.status))),
        field("Capability", item.capability),
        field("Boundary", item.boundary),
        field("Priority", item.priority),
        field("Attempts", `${item.attempts} of ${item.max_attempts}`),
        field("Assigned to", item.assigned_to ? store.handleOf(item.assigned_to) : "-"),
        field("Submitted by", item.submitted_by || "-"),
        field("Created", when(item.created_at)),
        field("Claimed", when(item.claimed_at)),
        field("Finished", when(item.finished_at)),
        field("Deadline", when(item.deadline)),
        field("Waiting", item.waiting_reason || "-"),
        field("Depends on", tags((item.depends_on || []).map(short))),
        field("Follow-up of", item.follow_up_of ? h("a", { href: `#work/${item.follow_up_of}`, id: "work-follow-up-of" }, store.work.get(item.follow_up_of)?.task_id || short(item.follow_up_of)) : "-"),
        field("Progress", progress)),
      h("h3", null, "Description"), h("pre", null, item.description),
      item.result !== null && item.result !== undefined ? [h("h3", null, "Result"), h("pre", null, JSON.stringify(item.result, null, 2))] : null,
      item.error ? [h("h3", null, "Last error"), h("pre", null, item.error)] : null,
      attempts(item),
      reviews(item),
      escalation(item),
      landing(item));
  }

  // An item that failed every attempt, put to a person (docs/operator.md, Escalation): the
  // diagnostic report, and the question to answer or what was decided.
  function escalation(item) {
    const e = item.escalation;
    if (!e) return null;
    const r = e.report;
    const spent = Object.entries(r.seconds_by_operation || {}).map(([name, s]) => `${name} ${s.toFixed(1)} s`).join(", ");
    const facts = h("dl", { class: "fields" },
      field("Question", e.decision ? `${e.priority} · decided: ${e.decision} by ${e.decided_by} · ${when(e.decided_at)}`
        : h("a", { href: "#questions" }, `${e.priority} · waiting for your answer`)),
      field("Reported", when(r.written_at)),
      field("Submission to dead letter", `${r.total_s.toFixed(1)} s`),
      field("Trace", `${r.spans} spans, ${r.failed_spans} failed${spent ? ` · ${spent}` : ""}`),
      field("Last checkpoint", r.checkpoint ? h("code", null, `${short(r.checkpoint)} on ${r.branch}`) : "-"));
    const t = table("Attempts in the report", ["Attempt", "Agent", "Seconds", "Error"]);
    replace(t.tbody, (r.attempts || []).map((a) => h("tr", null, h("td", null, a.attempt), h("td", null, store.handleOf(a.agent_id)),
      h("td", { class: "num" }, a.seconds == null ? "-" : a.seconds.toFixed(1)), h("td", null, a.error))));
    return h("div", { id: "work-escalation" }, h("h3", null, "Escalation"), facts, (r.attempts || []).length ? t.el : null);
  }

  // Its way to the target branch (docs/landing.md): where it waits or landed, and each
  // lander's try with the conflicting files or the gate's output tail.
  function landing(item) {
    const l = item.landing;
    if (!l) return null;
    const facts = h("dl", { class: "fields" },
      field("Target", h("code", null, l.target)),
      field("Author", l.author ? store.handleOf(l.author) : "-"),
      field("Reserved for", item.reserved_for ? store.handleOf(item.reserved_for) : "-"),
      field("Queued for landing", when(l.queued_at)),
      field("Failures", l.failures),
      field("Approval", h("span", { id: "work-approval" }, approval(item))),
      field("Landed", l.landed_sha ? h("code", null, `${short(l.landed_sha)} · ${when(l.landed_at)}`) : "-"));
    const t = table("Landing attempts, oldest first", ["At", "Lander", "Outcome", "Batch", "Files", "Gate s"]);
    replace(t.tbody, (l.attempts || []).map((a) => h("tr", { dataset: { outcome: a.outcome } },
      h("td", null, when(a.at)), h("td", null, store.handleOf(a.lander)), h("td", null, a.outcome),
      h("td", { class: "num" }, a.batch), h("td", null, (a.files || []).join(", ") || "-"),
      h("td", { class: "num" }, a.gate_s == null ? "-" : a.gate_s.toFixed(1)))));
    const last = (l.attempts || []).filter((a) => a.detail).pop();
    return h("div", { id: "work-landing" }, h("h3", null, "Landing"), facts,
      (l.attempts || []).length ? t.el : null,
      last ? [h("h4", null, `Latest (${last.outcome})`), h("pre", { class: "landing-detail" }, last.detail)] : null);
  }

  // The coordinator's veto: asked, given, or not asked (docs/landing.md).
  function approval(item) {
    const l = item.landing;
    if (item.status === "landing" && item.question_id) return "waiting for the operator's answer to \u201cland this?\u201d";
    if (l.approved_by) return `approved by ${l.approved_by} · ${when(l.approved_at)}`;
    return "-";
  }

  function attempts(item) {
    if (!item.errors || item.errors.length === 0) return null;
    const t = table("Attempts that failed", ["Attempt", "Agent", "Error", "At"]);
    replace(t.tbody, item.errors.map((e) => h("tr", null, h("td", null, e.attempt), h("td", null, store.handleOf(e.agent_id)), h("td", null, e.error), h("td", null, when(e.at)))));
    return [h("h3", null, "Attempts"), t.el];
  }

  // Each round handed in for review: who reviewed it, the verdict (a conditional pass with
  // links to the follow-up items it created), the score and the feedback.
  function reviews(item) {
    const rounds = (item.reviews || []).filter((r) => r.verdict);
    if (rounds.length === 0) return null;
    const t = table("Review rounds", ["Round", "Author", "Reviewer", "Verdict", "Score", "Feedback", "Follow-ups"]);
    replace(t.tbody, rounds.map((r) => h("tr", null, h("td", { class: "num" }, r.round), h("td", null, store.handleOf(r.author)),
      h("td", null, store.handleOf(r.reviewer)), h("td", null, r.verdict === "conditional" ? "conditional pass" : r.verdict),
      h("td", { class: "num" }, r.score == null ? "-" : r.score), h("td", null, r.feedback || "-"),
      h("td", { class: "follow-ups" }, (r.follow_ups || []).length ? (r.follow_ups || []).map((id) => h("div", null, h("a", { href: `#work/${id}` }, store.work.get(id)?.task_id || short(id)))) : "-"))));
    return h("div", { id: "work-reviews" }, h("h3", null, "Reviews"), t.el);
  }

  // heldUp: the project's bottlenecks (GET /api/work/bottlenecks), marked where the graph has them.
  function renderGraph(doc, heldUp) {
    if (doc.nodes.length <= 1) return h("p", { class: "note" }, "Work graph: no dependencies and no dependents.");
    const t = table(`Work graph${doc.truncated ? " (truncated)" : ""}`, ["Relation", "Depth", "Task", "Status", "Bottleneck"]);
    const byDepth = [...doc.nodes].sort((a, b) => (a.relation === "ancestor" ? -a.depth : a.depth) - (b.relation === "ancestor" ? -b.depth : b.depth));
    replace(t.tbody, byDepth.map((n) => h("tr", { dataset: heldUp.has(n.id) ? { workId: n.id, bottleneck: "yes" } : { workId: n.id } },
      h("td", null, n.relation), h("td", { class: "num" }, n.depth),
      h("td", null, n.item ? h("a", { href: `#work/${n.id}` }, n.item.task_id) : short(n.id)),
      h("td", null, statusText(n.item ? n.item.status : "deleted")),
      h("td", { class: heldUp.has(n.id) ? "failing" : null }, heldUp.has(n.id) ? `holds up ${heldUp.get(n.id)} open items` : "-"))));
    return t.el;
  }

  fetchItem();
  return view;
}

// An item's workstream (docs/workstreams.md): its branch, base, handed-in head and
// checkpoints, and what its code changed (GET /api/work/{id}/diff) as a file list and a
// unified diff, coloured by line (no library: the diff is text).
function renderCode(ws, doc, problem) {
  const facts = h("dl", { class: "fields", id: "work-branch" },
    field("Branch", h("code", null, ws.branch)),
    field("Base", h("code", null, `${ws.base_ref} @ ${short(ws.base_sha)}`)),
    field("Handed in", ws.head_sha ? h("code", null, `${short(ws.head_sha)} · ${ws.commits} commit(s), ${ws.files_changed} file(s), +${ws.insertions} -${ws.deletions}`) : "-"),
    field("Next attempt starts from", ws.resume_from ? h("code", null, short(ws.resume_from)) : "the branch"));
  const points = table("Checkpoints, newest first", ["Checkpoint", "Attempt", "Agent", "Files", "At"]);
  replace(points.tbody, (ws.checkpoints || []).map((c) => h("tr", null,
    h("td", null, h("code", null, short(c.sha))), h("td", { class: "num" }, c.attempt),
    h("td", null, short(c.agent_id)), h("td", { class: "num" }, c.files), h("td", null, when(c.at)))));
  const parts = [h("h3", null, "Code"), facts, (ws.checkpoints || []).length ? points.el : null];
  if (problem) return [...parts, h("p", { class: "note" }, `No diff: ${problem}`)];
  if (!doc) return parts;
  const files = table(`Files changed (${short(doc.base_sha)}..${short(doc.head_sha)})`, ["Status", "Path", "+", "-"]);
  replace(files.tbody, doc.files.map((f) => h("tr", null,
    h("td", null, f.status), h("td", null, h("code", null, f.path)),
    h("td", { class: "num" }, f.insertions ?? "binary"), h("td", { class: "num" }, f.deletions ?? ""))));
  const lines = doc.diff.split("\n").map((line) => h("span", {
    class: line.startsWith("+++") || line.startsWith("---") ? "diff-file"
      : line.startsWith("+") ? "diff-add" : line.startsWith("-") ? "diff-del"
      : line.startsWith("@@") ? "diff-hunk" : null,
  }, `${line}\n`));
  return [...parts, files.el,
    h("pre", { class: "diff", id: "work-diff", "aria-label": "Unified diff" }, lines),
    doc.truncated ? h("p", { class: "note" }, "The diff was cut at 1 MB; the file list is whole.") : null];
}

function field(label, value) {
  return [h("dt", null, label), h("dd", null, value instanceof Node ? value : String(value ?? "-"))];
}

function renderTree(items, author) {
  if (items.length === 0) return h("p", { class: "note" }, "Nothing recorded yet.");
  return h("ol", { class: "tree", "aria-label": "History, in tree order" }, items.map(({ depth, node }) => h("li", { dataset: { depth: String(depth) }, class: `depth-${Math.min(depth, 6)}` },
    h("span", { class: "kind" }, node.kind), node.role ? ` (${node.role})` : "", " ",
    h("span", { class: "when" }, `${when(node.at)} · ${author(node.author)}`),
    node.text ? h("div", null, node.text.length > 600 ? `${node.text.slice(0, 600)}…` : node.text) : null)));
}

// The item's trace (GET /api/work/{id}/trace) as a waterfall: each process's spans in tree
// order (children under their parent, by start), with a bar on one time axis, then the
// item's transitions on the same axis. Bars are placed through the CSSOM (the page's
// Content-Security-Policy allows no style attribute).
function renderTrace(doc, author) {
  const spans = doc.spans || [];
  const events = (doc.events || []).map((e) => ({ ...e, ns: Date.parse(e.at) * 1e6 })).filter((e) => !Number.isNaN(e.ns));
  const phases = (doc.phases || []).map((p) => ({ ...p, from: Date.parse(p.start) * 1e6, to: Date.parse(p.end) * 1e6 }))
    .filter((p) => !Number.isNaN(p.from) && !Number.isNaN(p.to));
  if (spans.length === 0 && events.length === 0) return h("p", { class: "note" }, "Nothing recorded for this item.");
  const starts = [...spans.map((s) => s.start_ns), ...events.map((e) => e.ns), ...phases.map((p) => p.from)];
  const origin = Math.min(...starts);
  const total = Math.max(1, Math.max(...spans.map((s) => s.end_ns), ...phases.map((p) => p.to), ...starts) - origin);
  // seconds once the timeline is 10 s or longer (a wait for a person is minutes), else ms
  const [unit, per] = total >= 10e9 ? ["s", 1e9] : ["ms", 1e6];
  const ms = (ns) => (ns / per).toFixed(1);
  const bar = (offset, duration, cls) => {
    const el = h("span", { class: `bar ${cls}` });
    el.style.marginLeft = `${Math.min(99.5, (100 * offset) / total)}%`;
    el.style.width = `${Math.max(0.5, (100 * duration) / total)}%`;
    return h("div", { class: "lane", "aria-hidden": "true" }, el);
  };
  const t = table(`Trace ${doc.trace_id || "-"}${doc.truncated ? " (first spans only)" : ""}`, ["Span", "Process", `Start ${unit}`, `Duration ${unit}`, "Timeline"]);
  t.el.id = "trace-waterfall";
  const rows = [];
  // what the item was doing between its transitions, as bars on the same axis
  for (const p of phases) {
    rows.push(h("tr", { dataset: { phase: p.name }, class: "phase" },
      h("th", { scope: "row" }, p.name), h("td", null, "phase"),
      h("td", { class: "num" }, ms(p.from - origin)), h("td", { class: "num" }, ms(p.to - p.from)),
      h("td", null, bar(p.from - origin, p.to - p.from, `phase-${p.name.replaceAll(" ", "-")}`))));
  }
  for (const { span, depth } of treeOrder(spans)) {
    const failed = span.status === "error";
    rows.push(h("tr", { dataset: { span: span.name }, class: failed ? "failed" : null },
      h("th", { scope: "row", class: `depth-${Math.min(depth, 6)}` }, span.name, failed ? h("span", { class: "error" }, ` (${span.error || "error"})`) : null),
      h("td", null, span.service.replace(/^loom-/, "")),
      h("td", { class: "num" }, ms(span.start_ns - origin)),
      h("td", { class: "num" }, ms(span.end_ns - span.start_ns)),
      h("td", null, bar(span.start_ns - origin, span.end_ns - span.start_ns, failed ? "bad" : "ok"))));
  }
  for (const e of events.sort((a, b) => a.ns - b.ns)) {
    rows.push(h("tr", { dataset: { event: e.kind }, class: "event" },
      h("th", { scope: "row" }, `◆ ${e.kind}`), h("td", null, author(e.author)),
      h("td", { class: "num" }, ms(e.ns - origin)), h("td", null, ""), h("td", null, bar(e.ns - origin, 0, "mark"))));
  }
  replace(t.tbody, rows);
  return t.el;
}

function treeOrder(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map();
  for (const s of spans) {
    const parent = s.parent_id && ids.has(s.parent_id) && s.parent_id !== s.span_id ? s.parent_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  const byStart = (a, b) => a.start_ns - b.start_ns || a.end_ns - b.end_ns;
  const out = [];
  const seen = new Set();
  const walk = (span, depth) => {
    if (seen.has(span.span_id)) return;
    seen.add(span.span_id);
    out.push({ span, depth });
    for (const child of (children.get(span.span_id) || []).sort(byStart)) walk(child, depth + 1);
  };
  for (const root of (children.get(null) || []).sort(byStart)) walk(root, 0);
  for (const s of [...spans].sort(byStart)) walk(s, 0); // parents that loop: still shown
  return out;
}
