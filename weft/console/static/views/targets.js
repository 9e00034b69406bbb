// Targets and spin-ups: where Weft can start agents, their health, and the spin-up
// operations (read once from /api/spinups, then kept current by spinup.* events).

import { h, replace, short, statusText, table, tags, time, when } from "../dom.js";

export function targetsView(ctx) {
  const { store, api } = ctx;
  const targets = table("Targets", ["Name", "Mechanism", "Agent type", "Capabilities", "Boundaries", "Health", "Enabled", "Max", "Agents"]);
  targets.el.id = "targets";
  const counts = table("Spin-ups by state", ["State", "Count"]);
  const ops = table("Spin-ups, newest first", ["Target", "State", "Reason", "Work", "Agent", "Updated", "Error"]);
  ops.el.id = "spinups";
  const mechanism = h("p", { class: "note" });
  const el = h("div", null, targets.el, h("h3", null, "Spin-ups"), mechanism, counts.el, ops.el);

  let read = false;

  function update() {
    if (!read) {
      read = true;
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
    replace(targets.tbody, rows.length === 0
      ? h("tr", null, h("td", { colspan: 9, class: "note" }, "No targets: Weft cannot start agents in this project."))
      : rows.map((t) => h("tr", { dataset: { targetId: t.id } },
        h("th", { scope: "row" }, t.name), h("td", null, t.mechanism), h("td", null, t.agent_type),
        h("td", null, tags(t.capabilities)), h("td", null, tags(t.boundaries)),
        h("td", { title: t.health_detail || null }, statusText(t.health)),
        h("td", null, t.enabled ? "yes" : "no"), h("td", { class: "num" }, t.max_concurrent),
        h("td", { class: "num" }, agentsOf.get(t.id) || 0))));
    const spinups = store.stats?.spinups || { by_state: {}, mechanism: "-" };
    mechanism.textContent = `Spin-up manager: ${spinups.mechanism}; ${spinups.total ?? 0} spin-ups recorded.`;
    replace(counts.tbody, Object.entries(spinups.by_state).sort().map(([s, n]) => h("tr", null, h("th", { scope: "row" }, statusText(s)), h("td", { class: "num" }, n))));
    const seen = [...store.spinups.values()].sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at)).slice(0, 200);
    replace(ops.tbody, seen.length === 0
      ? h("tr", null, h("td", { colspan: 7, class: "note" }, "None yet."))
      : seen.map((op) => h("tr", { dataset: { spinupId: op.id } },
        h("th", { scope: "row" }, op.target_name), h("td", null, statusText(op.state)), h("td", null, op.reason),
        h("td", null, op.work_id ? h("a", { href: `#work/${op.work_id}` }, short(op.work_id)) : "-"),
        h("td", null, store.handleOf(op.agent_id)), h("td", { title: when(op.updated_at) }, time(op.updated_at, now)),
        h("td", null, op.error || "-"))));
  }

  return { el, update };
}
