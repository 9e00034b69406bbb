// Leases: who holds which files (GET /api/leases, kept current by lease.* events), and
// ending one as an operator. A Weft without leases (no /api/leases) is said to have none.

import { confirmButton, gist, h, keepFocus, patch, replace, short, table, tags, time } from "../dom.js";

export function leasesView(ctx) {
  const { store, api } = ctx;
  const body = h("div", { id: "leases" }, h("p", { class: "note" }, "Asking Weft for leases…"));
  const el = h("div", null, body);
  const list = table("Live leases, soonest expiry first", ["Holder", "Paths", "Mode", "Work", "Reason", "Expires", "Actions"]);
  list.el.id = "lease-list";
  let state = "reading"; // reading | available | unavailable | failed
  let problem = "";

  async function load() {
    const read = store.beginRead("leases");
    try {
      const page = await api.get("/api/leases");
      store.setLeases(page.items || [], read);
      state = "available";
    } catch (error) {
      store.endRead(read);
      state = error.status === 404 ? "unavailable" : "failed";
      problem = error.message;
    }
    draw();
  }

  function draw() {
    if (state === "reading") return;
    if (state === "unavailable") {
      replace(body, h("p", { class: "note" }, "Leases aren't available in this Weft (it serves no /api/leases)."));
      return;
    }
    if (state === "failed") {
      replace(body, h("p", { class: "note" }, `Leases could not be read: ${problem}`));
      return;
    }
    const now = Date.now();
    const leases = [...store.leases.values()].sort((a, b) => Date.parse(a.expires_at) - Date.parse(b.expires_at));
    if (!body.contains(list.el)) replace(body, list.el);
    keepFocus(list.tbody, () => patch(list.tbody, leases.length === 0
      ? h("tr", null, h("td", { colspan: 7, class: "note" }, "No leases."))
      : leases.map((lease) => h("tr", { dataset: { leaseId: lease.id } },
        h("th", { scope: "row" }, lease.holder_handle || store.handleOf(lease.holder)),
        h("td", null, tags(lease.patterns)),
        h("td", null, lease.mode),
        h("td", null, lease.work_id ? workLink(store.work.get(lease.work_id), lease.work_id) : "-"),
        h("td", null, lease.reason || "-"),
        h("td", null, time(lease.expires_at, now)),
        h("td", null, confirmButton("End lease", "Confirm end lease", () =>
          ctx.act(() => api.delete(`/api/leases/${lease.id}`), "Lease ended").then((ended) => {
            if (ended) store.dropLease(lease.id);
          }), `lease-end:${lease.id}`, lease.patterns.join(", ")))))));
  }

  let read = false;
  function update() {
    if (!read) {
      read = true;
      load();
    }
    draw();
  }

  return { el, update };
}

function workLink(item, workId) {
  const link = h("a", { href: `#work/${workId}` }, item?.task_id || short(workId));
  return item ? h("span", null, link, " ", h("span", { class: "work-desc" }, gist(item.description, 50))) : link;
}
