// Leases: a seam. Weft may serve /api/leases (being built separately); this view reads it
// when it answers 200 and otherwise says leases are not available here.

import { h, replace, table } from "../dom.js";

export function leasesView(ctx) {
  const { api } = ctx;
  const body = h("div", { id: "leases" }, h("p", { class: "note" }, "Asking Weft for leases…"));
  const el = h("div", null, body);
  let read = false;

  async function load() {
    try {
      const page = await api.get("/api/leases");
      const items = Array.isArray(page) ? page : page.items || [];
      if (items.length === 0) {
        replace(body, h("p", { class: "note" }, "No leases."));
        return;
      }
      const columns = Object.keys(items[0]).filter((k) => typeof items[0][k] !== "object").slice(0, 8);
      const t = table("Leases", columns);
      replace(t.tbody, items.map((lease) => h("tr", null, columns.map((c) => h("td", null, String(lease[c] ?? "-"))))));
      replace(body, t.el);
    } catch (error) {
      replace(body, h("p", { class: "note" }, error.status === 404
        ? "Leases aren't available in this Weft (it serves no /api/leases)."
        : `Leases could not be read: ${error.message}`));
    }
  }

  function update() {
    if (!read) {
      read = true;
      load();
    }
  }

  return { el, update };
}
