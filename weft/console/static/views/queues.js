// Queues and dead letters: whether the project is paused (GET /api/pause, with pause and
// resume), depth per capability (live from the stats topic), the landing queue (GET
// /api/landing: who lands now, what waits to land) and the DLQ, with retry and discard.

import { confirmButton, h, keepFocus, patch, replace, statusText, table, when } from "../dom.js";

export function queuesView(ctx) {
  const { store, api } = ctx;
  const depths = table("Queue depth by capability", ["Capability", "Depth", "Waiting"]);
  depths.el.id = "queue-depths";
  const dlq = table("Dead-letter queue, oldest first", ["Task", "Capability", "Attempts", "Last error", "Dead-lettered", "Actions"]);
  dlq.el.id = "dead-letters";
  const note = h("p", { class: "note" });
  const lander = h("p", { id: "landing-now" });
  const landingQueue = table("Landing queue: being landed, then in the order landers take them", ["Task", "Status", "Branch", "Author", "Failures", "Last try"]);
  landingQueue.el.id = "landing-queue";
  const landingPanel = h("section", { id: "landing", "aria-label": "Landing" }, h("h3", null, "Landing"), lander, landingQueue.el);
  const pausePanel = h("section", { id: "pause", "aria-label": "Pause" });
  const el = h("div", null, pausePanel, depths.el, note, landingPanel, dlq.el);
  const pauseReason = h("input", { id: "pause-reason", type: "text", maxlength: 500, size: 40, placeholder: "why (agents are told)" });
  const pauseStop = h("input", { id: "pause-stop-running", type: "checkbox" });
  const pauseForm = h("div", null,
    h("p", { id: "pause-state" }, "Claims and spin-ups are admitted."),
    h("div", { class: "filters" }, h("label", { for: "pause-reason" }, "Reason"), pauseReason,
      h("label", { for: "pause-stop-running" }, "Stop held items at their next checkpoint"), pauseStop,
      confirmButton("Pause the project", "Confirm pause", () => ctx.act(() => api.put("/api/pause", { reason: pauseReason.value, stop_running: pauseStop.checked }), "Paused the project").then(() => {
        pauseReason.value = "";
        pauseStop.checked = false;
        return readPause();
      }), "pause-project")));
  let paused; // undefined: not read yet; else the GET /api/pause answer's paused (null: not paused)
  let seenHold;
  let letters = null;
  let landing; // undefined: not read yet; null: no repository
  let seenWork = -1;
  let reading = false;

  async function readDlq() {
    if (reading) return;
    reading = true;
    try {
      letters = await api.all("/api/dlq");
    } catch (error) {
      letters = [];
      ctx.announce(error.message);
    } finally {
      reading = false;
    }
    draw();
  }

  async function readLanding() {
    try {
      landing = await api.get("/api/landing");
    } catch (error) {
      landing = error.status === 404 ? null : { error: error.message };
    }
    draw();
  }

  async function readPause() {
    try {
      paused = (await api.get("/api/pause")).paused;
    } catch (error) {
      paused = undefined;
      ctx.announce(`Whether the project is paused could not be read: ${error.message}`);
    }
    drawPause();
  }

  // An operator's pause (docs/operations.md, Pause): no new claims or spin-ups until resumed.
  function drawPause() {
    if (paused === undefined) return;
    if (paused) {
      replace(pausePanel,
        h("p", { id: "pause-state", class: "error" }, `Paused by ${paused.by} · ${when(paused.at)}${paused.reason ? `: ${paused.reason}` : ""}. No new claims or spin-ups; ${paused.stop_running ? "held items stop at their next checkpoint (handed back to the queue)" : "held items go on"}.`),
        h("button", { type: "button", id: "resume-project", onclick: () => ctx.act(() => api.delete("/api/pause"), "Resumed the project").then(readPause) }, "Resume"));
      return;
    }
    // The form is made once and put back on every redraw: a redraw while the operator types
    // (the stats' hold arriving) must not drop what was typed or the focus.
    if (pauseForm.parentNode === pausePanel) return;
    replace(pausePanel, pauseForm);
  }

  function update() {
    const hold = store.stats?.budget_hold ?? null;
    if (paused === undefined || hold !== seenHold) {
      seenHold = hold; // a pause or resume elsewhere changes the hold the stats carry
      readPause();
    }
    if (store.revision.work !== seenWork) {
      seenWork = store.revision.work; // a work change may be a dead letter in or out, or a landing
      readDlq();
      readLanding();
    }
    draw();
  }

  function drawLanding() {
    const none = (text) => h("tr", null, h("td", { colspan: 6, class: "note" }, text));
    if (landing === undefined) {
      lander.textContent = "Reading the landing queue…";
      return;
    }
    if (landing === null || landing.error) {
      lander.textContent = landing ? landing.error : "No repository is set: nothing lands (the targets view sets one).";
      patch(landingQueue.tbody, none("Nothing waits to land."));
      return;
    }
    const lock = landing.lock;
    lander.textContent = lock
      ? `Landing on ${landing.target} now: ${store.handleOf(lock.holder)}, ${lock.items.length} item(s).`
      : `Nobody is landing on ${landing.target} now.`;
    patch(landingQueue.tbody, landing.queue.length === 0
      ? none("Nothing waits to land.")
      : landing.queue.map((e) => h("tr", { dataset: { workId: e.work_id } },
        h("th", { scope: "row" }, h("a", { href: `#work/${e.work_id}`, title: e.description.slice(0, 200) }, e.task_id)),
        h("td", null, e.question_id
          ? [statusText(e.status), " \u00b7 ", h("a", { href: "#questions", class: "asks-operator" }, "asks you: land this?")]
          : /^https?:\/\//.test(e.pull_request || "") ? [statusText(e.status), " \u00b7 ", h("a", { href: e.pull_request, rel: "noopener" }, "pull request")] : statusText(e.status)),
        h("td", null, e.branch ? h("code", null, e.branch) : "-"),
        h("td", null, e.author ? store.handleOf(e.author) : "-"),
        h("td", { class: "num" }, e.failures),
        h("td", null, e.last_attempt ? `${e.last_attempt.outcome}${(e.last_attempt.files || []).length ? `: ${e.last_attempt.files.join(", ")}` : ""}` : "-"))));
  }

  function draw() {
    drawLanding();
    const stats = store.stats || { queue_depths: {}, work: {} };
    const waiting = new Map();
    for (const item of store.work.values()) {
      if (item.status === "queued" && item.waiting_reason) waiting.set(item.capability, (waiting.get(item.capability) || 0) + 1);
    }
    const caps = Object.entries(stats.queue_depths || {}).sort();
    patch(depths.tbody, caps.length === 0
      ? h("tr", null, h("td", { colspan: 3, class: "note" }, "No queued work."))
      : caps.map(([cap, depth]) => h("tr", { dataset: { capability: cap } }, h("th", { scope: "row" }, cap), h("td", { class: "num" }, depth), h("td", { class: "num" }, waiting.get(cap) || 0))));
    note.textContent = `${stats.work?.waiting_for_agent ?? 0} queued items have no eligible agent online; ${stats.dead_letters ?? 0} dead letters.`;
    if (letters === null) {
      patch(dlq.tbody, h("tr", null, h("td", { colspan: 6, class: "note" }, "Reading the dead-letter queue…")));
      return;
    }
    // every live update draws the rows again: patch keeps those drawn the same, buttons and all
    keepFocus(dlq.tbody, () => patch(dlq.tbody, letters.length === 0
      ? h("tr", null, h("td", { colspan: 6, class: "note" }, "The dead-letter queue is empty."))
      : letters.map(({ item, dead_lettered_at: at }) => {
        const last = item.errors && item.errors.length ? item.errors[item.errors.length - 1].error : item.error || "-";
        return h("tr", { dataset: { workId: item.id } },
          h("th", { scope: "row" }, h("a", { href: `#work/${item.id}` }, item.task_id)),
          h("td", null, item.capability),
          h("td", { class: "num" }, item.attempts),
          h("td", null, last),
          h("td", null, when(at)),
          h("td", null, h("div", { class: "actions" },
            h("button", { type: "button", dataset: { focusKey: `dlq-retry:${item.id}` }, "aria-label": `Retry ${item.task_id}`, onclick: () => ctx.act(() => api.post(`/api/dlq/${item.id}/retry`), `Put ${item.task_id} back in the queue`).then(readDlq) }, "Retry"),
            confirmButton("Discard", "Confirm discard", () => ctx.act(() => api.delete(`/api/dlq/${item.id}`), `Discarded ${item.task_id}`).then(readDlq), `dlq-discard:${item.id}`, item.task_id))));
      })));
  }

  return { el, update };
}
