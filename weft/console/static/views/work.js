// Work: every item, filtered by status, capability, boundary and priority, searched by text;
// an item's detail (history as its context tree, attempts and their errors, progress, result,
// its work graph) with cancel and retry.

import { FINAL } from "../store.js";
import { Pager, confirmButton, fillOptions, h, keepFocus, replace, select, short, statusText, table, tags, time, when } from "../dom.js";

const STATUSES = ["submitted", "blocked", "queued", "claimed", "in-progress", "waiting-on-operator", "in-review", "reviewing", "completed", "failed", "cancelled", "expired", "dead-lettered"];
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
  const list = table("Work items, newest first", ["Task", "Status", "Capability", "Boundary", "Priority", "Attempts", "Assigned to", "Updated"]);
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
    keepFocus(list.tbody, () => replace(list.tbody, page.length === 0
      ? h("tr", null, h("td", { colspan: 8, class: "note" }, store.work.size === 0 ? "No work in this project." : "No item matches."))
      : page.map((item) => h("tr", { dataset: { workId: item.id } },
      h("th", { scope: "row" }, h("a", { href: `#work/${item.id}`, title: item.description.slice(0, 200), dataset: { focusKey: `work:${item.id}` } }, item.task_id)),
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
  const el = h("div", null,
    h("p", null, h("a", { href: "#work" }, "← all work")),
    actions, summary,
    graph,
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
    const [tree, deps] = await Promise.allSettled([
      api.get(`/api/contexts/${workId}/nodes`, { limit: 500 }),
      api.get(`/api/work/${workId}/graph`),
    ]);
    if (tree.status === "fulfilled") replace(history, renderTree(tree.value.items, (id) => store.agents.get(id)?.handle ?? id));
    else replace(history, h("p", { class: "note" }, `No history: ${tree.reason.message}`));
    if (deps.status === "fulfilled") replace(graph, renderGraph(deps.value));
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
    keepFocus(actions, () => replace(actions,
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
        field("Progress", progress)),
      h("h3", null, "Description"), h("pre", null, item.description),
      item.result !== null && item.result !== undefined ? [h("h3", null, "Result"), h("pre", null, JSON.stringify(item.result, null, 2))] : null,
      item.error ? [h("h3", null, "Last error"), h("pre", null, item.error)] : null,
      attempts(item));
  }

  function attempts(item) {
    if (!item.errors || item.errors.length === 0) return null;
    const t = table("Attempts that failed", ["Attempt", "Agent", "Error", "At"]);
    replace(t.tbody, item.errors.map((e) => h("tr", null, h("td", null, e.attempt), h("td", null, store.handleOf(e.agent_id)), h("td", null, e.error), h("td", null, when(e.at)))));
    return [h("h3", null, "Attempts"), t.el];
  }

  function renderGraph(doc) {
    if (doc.nodes.length <= 1) return h("p", { class: "note" }, "Work graph: no dependencies and no dependents.");
    const t = table(`Work graph${doc.truncated ? " (truncated)" : ""}`, ["Relation", "Depth", "Task", "Status"]);
    const byDepth = [...doc.nodes].sort((a, b) => (a.relation === "ancestor" ? -a.depth : a.depth) - (b.relation === "ancestor" ? -b.depth : b.depth));
    replace(t.tbody, byDepth.map((n) => h("tr", null,
      h("td", null, n.relation), h("td", { class: "num" }, n.depth),
      h("td", null, n.item ? h("a", { href: `#work/${n.id}` }, n.item.task_id) : short(n.id)),
      h("td", null, statusText(n.item ? n.item.status : "deleted")))));
    return t.el;
  }

  fetchItem();
  return view;
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
