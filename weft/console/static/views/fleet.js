// Fleet: every agent of the project by status and type, what it is working on, its last
// heartbeat, capabilities and the target that started it; shut one down (admin tokens).

import { HourChart } from "../chart.js";
import { Pager, confirmButton, fillOptions, gist, h, keepFocus, patch, select, short, statusText, table, tags, time } from "../dom.js";

const state = { status: "", type: "", search: "" }; // kept while the page is open
let painted = false; // the first fleet with its agents is marked for the Performance API

export function fleetView(ctx) {
  const { store, api } = ctx;
  const cards = h("dl", { class: "cards", "aria-label": "Agents by status" });
  const byType = table("Agents by type", ["Type", "Online", "Busy", "Offline"]);
  const chart = new HourChart();
  const status = select("fleet-status", "Status", [["", "any"], ["online", "online"], ["busy", "busy"], ["offline", "offline"]], state.status, (v) => {
    state.status = v;
    pager.page = 0;
    update();
  });
  const type = select("fleet-type", "Type", [["", "any"]], state.type, (v) => {
    state.type = v;
    pager.page = 0;
    update();
  });
  const search = h("input", { id: "fleet-search", type: "search", value: state.search, placeholder: "handle, capability, id" });
  search.addEventListener("input", () => {
    state.search = search.value.trim().toLowerCase();
    pager.page = 0;
    update();
  });
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter agents", onsubmit: (e) => e.preventDefault() },
    status.wrap, type.wrap, h("div", null, h("label", { for: "fleet-search" }, "Search"), search));
  const agents = table("Agents", ["Handle", "Type", "Status", "Current work", "Last heartbeat", "Capabilities", "Spun up by", "Actions"]);
  agents.el.id = "agents";
  const pager = new Pager("Agents");
  pager.onchange = () => update();
  const loading = h("p", { class: "note" }, "Reading the registry…");

  // the protocol's other agents: the account's, not the project's (docs/interop.md)
  const others = table("Other agents on NATS (Synadia's Agent Protocol)", ["Session", "Kind", "Owner", "Heard from", "Description"]);
  others.el.id = "protocol-agents";

  const el = h("div", null,
    h("div", { class: "grid" }, h("div", null, cards), chart.el),
    filters, loading, agents.el, pager.el, byType.el, others.el);

  function update() {
    const now = Date.now();
    const all = [...store.agents.values()];
    const counts = { online: 0, busy: 0, offline: 0 };
    const types = new Map();
    for (const agent of all) {
      counts[agent.status] = (counts[agent.status] || 0) + 1;
      const row = types.get(agent.agent_type) || { online: 0, busy: 0, offline: 0 };
      row[agent.status] = (row[agent.status] || 0) + 1;
      types.set(agent.agent_type, row);
    }
    const stats = store.stats || {};
    const depth = Object.values(stats.queue_depths || {}).reduce((a, b) => a + b, 0);
    patch(cards,
      card("Online", counts.online), card("Busy", counts.busy), card("Offline", counts.offline),
      card("Queued", stats.work?.by_status?.queued ?? depth), card("Dead letters", stats.dead_letters ?? 0));
    patch(byType.tbody, [...types.entries()].sort().map(([name, row]) =>
      h("tr", null, h("th", { scope: "row" }, name), h("td", { class: "num" }, row.online), h("td", { class: "num" }, row.busy), h("td", { class: "num" }, row.offline))));
    fillOptions(type.el, [["", "any"], ...[...types.keys()].sort().map((t) => [t, t])], state.type);
    chart.update(store, now);
    loading.hidden = store.loaded.agents;

    const held = store.heldBy();
    const rows = all
      .filter((a) => (!state.status || a.status === state.status) && (!state.type || a.agent_type === state.type))
      .filter((a) => !state.search || matches(a, state.search))
      .sort((a, b) => a.handle.localeCompare(b.handle) || a.agent_id.localeCompare(b.agent_id));
    const page = pager.slice(rows, "agents");
    keepFocus(agents.tbody, () => patch(agents.tbody, page.length === 0
      ? h("tr", null, h("td", { colspan: 8, class: "note" }, all.length === 0 ? "No agent has registered in this project." : "No agent matches."))
      : page.map((agent) => row(agent, held.get(agent.agent_id) || [], now))));
    patch(others.tbody, store.protocolAgents.length === 0
      ? h("tr", null, h("td", { colspan: 5, class: "note" }, "No other agent of the protocol answers on this NATS account."))
      : store.protocolAgents.map((agent) => h("tr", { dataset: { instanceId: agent.instance_id } },
        h("th", { scope: "row", title: agent.prompt_subject }, agent.session_name),
        h("td", null, agent.agent),
        h("td", null, agent.owner),
        h("td", null, agent.online === null ? h("span", { class: "note" }, "no heartbeat yet")
          : agent.online ? time(agent.last_heartbeat, now) : h("span", { class: "status s-offline" }, "silent")),
        h("td", null, gist(agent.description, 80)))));
    if (!painted && store.loaded.agents) {
      painted = true;
      // the next frame starts once this one is painted (the perf suite reads the mark)
      requestAnimationFrame(() => performance.mark("loom:fleet-painted"));
    }
  }

  function row(agent, work, now) {
    const target = agent.target_id ? store.targets.get(agent.target_id) : null;
    const spunUp = agent.target_id ? (target ? target.name : short(agent.target_id)) : "-";
    const actions = agent.status === "offline"
      ? h("span", { class: "note" }, "-")
      : confirmButton("Shut down", "Confirm shut down", () =>
        ctx.act(() => api.post(`/api/agents/${agent.agent_id}/shutdown`, { reason: "from the console" }), `Asked ${agent.handle} to shut down`),
        `shutdown:${agent.agent_id}`, agent.handle);
    return h("tr", { dataset: { agentId: agent.agent_id } },
      h("th", { scope: "row", title: agent.agent_id }, agent.handle),
      h("td", null, agent.agent_type),
      h("td", { class: "agent-status" }, agentStatus(agent)),
      h("td", null, work.length === 0 ? h("span", { class: "note" }, `idle (${agent.current_tasks}/${agent.max_concurrent_tasks})`)
        : work.map((item) => h("div", null, h("a", { href: `#work/${item.id}`, dataset: { focusKey: `agent-work:${item.id}` } }, item.task_id), " ", statusText(item.status), h("div", { class: "work-desc" }, gist(item.description, 60))))),
      h("td", null, time(agent.last_heartbeat, now)),
      h("td", null, tags(agent.capabilities)),
      h("td", { title: agent.spinup_id ? `spin-up ${agent.spinup_id}` : null }, spunUp),
      h("td", null, actions));
  }

  return { el, update };
}

function card(label, value) {
  return h("div", null, h("dt", null, label), h("dd", null, String(value)));
}

function matches(agent, text) {
  return agent.handle.toLowerCase().includes(text) || agent.agent_id.startsWith(text) ||
    agent.capabilities.some((c) => c.includes(text)) || agent.agent_type.includes(text);
}

// An agent that deregistered (stopped normally, e.g. by idle shutdown: it reported itself
// offline) is quiet; one still reported online whose heartbeats stopped is the alarm: it was
// lost, not stopped. (``stale`` alone cannot tell them apart: a deregistered agent's last
// heartbeat ages too.)
function agentStatus(agent) {
  if (agent.status !== "offline") return statusText(agent.status);
  if (agent.reported_status === "offline") return h("span", { class: "status s-stopped", title: "it deregistered (stopped normally)" }, "offline");
  return h("span", { class: "status s-offline", title: "it stopped sending heartbeats" }, "offline (lost)");
}
