// Targets and spin-ups: where Weft can start agents, their health, and the spin-up
// operations (read once from /api/spinups, then kept current by spinup.* events); and the
// project's repository, where each item's branch and worktree come from
// (docs/workstreams.md): read with a check of whether it answers, and set here (admin).

import { gist, h, patch, replace, short, statusText, table, tags, time, when } from "../dom.js";

export function targetsView(ctx) {
  const { store, api } = ctx;
  const targets = table("Targets", ["Name", "Mechanism", "Agent type", "Capabilities", "Boundaries", "Health", "Enabled", "Max", "Agents"]);
  targets.el.id = "targets";
  const counts = table("Spin-ups by state", ["State", "Count"]);
  const ops = table("Spin-ups, newest first", ["Target", "State", "Reason", "Work", "Agent", "Updated", "Error"]);
  ops.el.id = "spinups";
  const mechanism = h("p", { class: "note" });
  const repository = h("div", { id: "repository" });
  const el = h("div", null, targets.el, h("h3", null, "Spin-ups"), mechanism, counts.el, ops.el,
    h("h3", null, "Repository"), repository);

  let read = false;

  function showRepository(doc, problem) {
    const url = h("input", { id: "repository-url", type: "text", value: doc?.repository.url ?? "", placeholder: "/srv/git/app.git or ssh://… (no credentials)", size: 50 });
    const target = h("input", { id: "repository-target", type: "text", value: doc?.repository.target_branch ?? "main", size: 16 });
    const reach = doc?.reach;
    const facts = doc ? h("dl", { class: "fields", id: "repository-fields" },
      h("dt", null, "URL"), h("dd", null, h("code", null, doc.repository.url)),
      h("dt", null, "Target branch"), h("dd", null, doc.repository.target_branch),
      h("dt", null, "Branch names"), h("dd", null, h("code", null, doc.repository.branch_template)),
      h("dt", null, "Worktrees"), h("dd", null, h("code", null, doc.repository.worktree_root)),
      h("dt", null, "Workstreams"), h("dd", null, doc.repository.enabled ? "on" : "off"),
      h("dt", null, "From Weft"), h("dd", { id: "repository-reach", class: reach && !reach.problem ? null : "error" },
        !reach ? "not checked" : reach.problem ? `${reach.reachable ? "answers" : "does not answer"}: ${reach.problem}` : "answers; the target branch is there"))
      : h("p", { class: "note" }, problem || "No repository: agents work in their own checkouts.");
    const form = h("form", { class: "filters", "aria-label": "Set the repository", onsubmit: (event) => {
      event.preventDefault();
      ctx.act(() => api.put("/api/repository", { url: url.value, target_branch: target.value }), "Repository set")
        .then((stored) => { if (stored) showRepository(stored); });
    } },
    h("div", null, h("label", { for: "repository-url" }, "URL"), url),
    h("div", null, h("label", { for: "repository-target" }, "Target branch"), target),
    h("button", { type: "submit" }, doc ? "Change" : "Set"));
    replace(repository, facts, form);
  }

  function update() {
    if (!read) {
      read = true;
      api.get("/api/repository", { check: true })
        .then((doc) => showRepository(doc))
        .catch((error) => showRepository(null, error.status === 404 ? null : `The repository could not be read: ${error.message}`));
      api.get("/api/spinups", { limit: 200 })
        .then((page) => {
          for (const op of page.items) if (!store.spinups.has(op.id)) store.spinups.set(op.id, op);
          store.changed("spinups");
        })
        .catch((error) => ctx.announce(`Spin-ups could not be read: ${error.message}`));
    }
    const now = Date.now();
    const agentsOf = new Map();
    for (const agent of store.agents.values()) {
      if (agent.target_id && agent.status !== "offline") agentsOf.set(agent.target_id, (agentsOf.get(agent.target_id) || 0) + 1);
    }
    const rows = [...store.targets.values()].sort((a, b) => a.name.localeCompare(b.name));
    patch(targets.tbody, rows.length === 0
      ? h("tr", null, h("td", { colspan: 9, class: "note" }, "No targets: Weft cannot start agents in this project."))
      : rows.map((t) => h("tr", { dataset: { targetId: t.id } },
        h("th", { scope: "row" }, t.name), h("td", null, t.mechanism), h("td", null, t.agent_type),
        h("td", null, tags(t.capabilities)), h("td", null, tags(t.boundaries)),
        h("td", { title: t.health_detail || null }, statusText(t.health)),
        h("td", { class: t.tripped_at ? "failing" : null }, t.enabled ? "yes"
          : t.tripped_at ? `no: disabled by its circuit breaker ${when(t.tripped_at)} (${t.tripped_reason || "it kept failing"})` : "no"),
        h("td", { class: "num" }, t.max_concurrent),
        h("td", { class: "num" }, agentsOf.get(t.id) || 0))));
    const spinups = store.stats?.spinups || { by_state: {}, mechanism: "-" };
    mechanism.textContent = `Spin-up manager: ${spinups.mechanism}; ${spinups.total ?? 0} spin-ups recorded.`;
    patch(counts.tbody, Object.entries(spinups.by_state).sort().map(([s, n]) => h("tr", null, h("th", { scope: "row" }, statusText(s)), h("td", { class: "num" }, n))));
    const seen = [...store.spinups.values()].sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at)).slice(0, 200);
    patch(ops.tbody, seen.length === 0
      ? h("tr", null, h("td", { colspan: 7, class: "note" }, "None yet."))
      : seen.map((op) => h("tr", { dataset: { spinupId: op.id } },
        h("th", { scope: "row" }, op.target_name), h("td", null, statusText(op.state)), h("td", null, op.reason),
        h("td", null, op.work_id ? h("a", { href: `#work/${op.work_id}`, title: op.work_id }, workText(store.work.get(op.work_id), op.work_id)) : "-"),
        h("td", null, store.handleOf(op.agent_id)), h("td", { title: when(op.updated_at) }, time(op.updated_at, now)),
        h("td", null, op.error || "-"))));
  }

  return { el, update };
}

function workText(item, workId) {
  return item ? `${item.task_id}: ${gist(item.description, 40)}` : short(workId);
}
