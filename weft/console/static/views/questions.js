// Questions agents asked the operator: the open ones most urgent first, answered or put off
// here; where else a person hears of them (the notification sinks, GET /api/notify/sinks,
// read again at most every 10 s while the view is open); then the settled ones.

import { h, keepFocus, patch, short, statusText, table, time, when } from "../dom.js";

const HOUR_MS = 3600 * 1000;
const SINKS_MS = 10000; // the sinks are read again when the view updates, at most this often
const PUT_OFF = [["1", "1 hour"], ["4", "4 hours"], ["24", "tomorrow"]]; // [hours, label]
const MODES = {
  sync: () => "the work waits",
  async: () => "the agent goes on",
  bypass: (q) => `its default answers ${q.decide_at ? when(q.decide_at) : "soon"}`,
};

const rank = (q) => Number(String(q.priority || "P0").slice(1)) || 0;
const isDeferred = (q, now) => Boolean(q.deferred_until) && Date.parse(q.deferred_until) > now;

/** Not put off first, then P0..P3, then the oldest first (as Weft's own listing orders them). */
function byUrgency(now) {
  return (a, b) =>
    isDeferred(a, now) - isDeferred(b, now) || rank(a) - rank(b) ||
    Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export function questionsView(ctx) {
  const { store, api } = ctx;
  const open = h("div", { id: "open-questions" });
  const past = table("Answered, expired and logged", ["Question", "Priority", "Asked by", "Status", "Answer", "Resolved"]);
  const sinks = table("Notification sinks", ["Name", "Kind", "Floor", "Notices", "Deliveries"]);
  sinks.el.id = "notify-sinks";
  const el = h("div", null, h("h3", null, "Waiting for an answer"), open, sinks.el, past.el);
  const drafts = new Map(); // question id -> what the operator typed so far
  const spans = new Map(); // question id -> the "put off" duration chosen so far (hours)

  let sinkList; // undefined: not read yet; else the sinks, or {problem} when they could not be read
  let sinksReadAt = 0;
  let readingSinks = false;

  async function readSinks() {
    readingSinks = true;
    sinksReadAt = Date.now();
    try {
      sinkList = (await api.get("/api/notify/sinks")).items;
    } catch (error) {
      sinkList = { problem: error.status === 404 ? "This Weft has no notification sinks (it serves no /api/notify/sinks)." : `Notification sinks could not be read: ${error.message}` };
    } finally {
      readingSinks = false;
    }
    drawSinks();
  }

  /** Where else a person hears of questions: each sink, its floor and kinds, and whether its
   * deliveries go through (a failing one in red). Never a URL: Weft does not send them. */
  function drawSinks() {
    const note = (text) => h("tr", null, h("td", { colspan: 5, class: "note" }, text));
    patch(sinks.tbody, sinkList === undefined ? note("Reading the notification sinks…")
      : sinkList.problem ? note(sinkList.problem)
        : sinkList.length === 0 ? note("No notification sinks: a person hears of questions only here (shuttle notify set, docs/operator.md)")
          : sinkList.map((s) => h("tr", { dataset: { sinkName: s.name } },
            h("th", { scope: "row" }, s.name, s.enabled ? null : h("span", { class: "note" }, " (off)")),
            h("td", null, `${s.kind} (${s.scheme})`),
            h("td", null, s.min_priority),
            h("td", null, s.events ? s.events.join(", ") : "all"),
            deliveries(s.status || {}))));
  }

  function deliveries(st) {
    if (st.failing_since) return h("td", { class: "failing" }, `failing since ${when(st.failing_since)}: ${st.last_error || "no reason given"}`);
    return h("td", { title: st.last_sent_at ? `last sent ${when(st.last_sent_at)}` : null }, st.sent ? `${st.sent} sent` : "nothing sent yet");
  }

  function update() {
    if (!readingSinks && Date.now() - sinksReadAt >= SINKS_MS) readSinks();
    drawSinks();
    const now = Date.now();
    const all = [...store.questions.values()].sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
    const waiting = all.filter((q) => q.status === "open").sort(byUrgency(now));
    keepFocus(open, () => patch(open, !store.loaded.questions
      ? h("p", { class: "note" }, "Reading the questions…")
      : waiting.length === 0 ? h("p", { class: "note" }, "No agent is waiting for an answer.")
        : waiting.map((q) => answerForm(q, now))));
    patch(past.tbody, all.filter((q) => q.status !== "open").slice(0, 200).map((q) => h("tr", { dataset: { questionId: q.id } },
      h("th", { scope: "row" }, q.question), h("td", { class: "num" }, q.priority || "-"),
      h("td", null, q.asked_by_handle || short(q.asked_by)), h("td", null, statusText(q.status)),
      h("td", null, q.answer ?? q.resolution ?? "-", q.answered_by === "policy" ? " (default)" : null),
      h("td", null, when(q.resolved_at)))));
  }

  function answerForm(q, now) {
    const id = `answer-${q.id}`;
    const input = q.choices.length
      ? h("select", { id, dataset: { focusKey: id } }, q.choices.map((c) => h("option", { value: c }, c)))
      : h("textarea", { id, rows: 2, cols: 60, dataset: { focusKey: id } });
    if (drafts.has(q.id)) input.value = drafts.get(q.id);
    input.addEventListener("input", () => drafts.set(q.id, input.value));
    input.addEventListener("change", () => drafts.set(q.id, input.value));
    const form = h("form", { class: "filters", "aria-label": `Answer: ${q.question}` },
      h("div", null, h("label", { for: id }, "Answer"), input),
      h("button", { type: "submit", dataset: { focusKey: `${id}-send` } }, "Send answer"),
      putOffControl(q, now));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const answer = input.value.trim();
      if (!answer) return;
      ctx.act(() => api.post(`/api/questions/${q.id}/answer`, { answer }), "Answer sent").then((done) => {
        if (done) {
          drafts.delete(q.id);
          store.questions.set(done.id, done);
          store.changed("questions");
        }
      });
    });
    const deferred = isDeferred(q, now);
    const priority = q.priority || "P0";
    const mode = MODES[q.mode] ? MODES[q.mode](q) : null;
    return h("article", { class: deferred ? "question deferred" : "question", dataset: { questionId: q.id, priority, ...(deferred ? { deferred: "true" } : {}) } },
      h("p", null, h("strong", null, q.question)),
      h("p", { class: "note" },
        h("span", { class: `priority p-${priority}`, dataset: { priority } }, q.category ? `${priority} · ${q.category}` : priority),
        mode ? ` ${mode} · ` : " ",
        `asked by ${q.asked_by_handle || short(q.asked_by)} `, time(q.created_at, now),
        q.work_id ? [" about ", h("a", { href: `#work/${q.work_id}` }, "its work item")] : null,
        q.deadline ? ` · answer before ${when(q.deadline)}` : null),
      q.default_answer != null ? h("p", { class: "note default-answer" }, `agent's default: ${q.default_answer}`) : null,
      deferred ? h("p", { class: "note put-off" }, `put off until ${when(q.deferred_until)}`, q.deferred_by ? ` by ${q.deferred_by}` : null) : null,
      form);
  }

  /** A duration and a "Put off" button: the question stays open, listed after the others until
   * then. Only durations that end before the question's deadline are offered (Weft refuses the rest). */
  function putOffControl(q, now) {
    const deadline = q.deadline ? Date.parse(q.deadline) : Infinity;
    const fits = PUT_OFF.filter(([hours]) => now + Number(hours) * HOUR_MS < deadline);
    if (fits.length === 0) return null;
    const id = `put-off-${q.id}`;
    const span = h("select", { id, dataset: { focusKey: id } }, fits.map(([hours, label]) => h("option", { value: hours }, label)));
    if (fits.some(([hours]) => hours === spans.get(q.id))) span.value = spans.get(q.id);
    span.addEventListener("change", () => spans.set(q.id, span.value));
    const button = h("button", { type: "button", class: "secondary", dataset: { focusKey: `${id}-send` } }, "Put off");
    button.addEventListener("click", () => {
      const until = new Date(Date.now() + Number(span.value) * HOUR_MS).toISOString();
      ctx.act(() => api.post(`/api/questions/${q.id}/defer`, { until }), `Put off until ${when(until)}`).then((done) => {
        if (done) {
          spans.delete(q.id);
          store.questions.set(done.id, done);
          store.changed("questions");
        }
      });
    });
    return h("div", { role: "group", "aria-label": `Put off: ${q.question}` }, h("label", { for: id }, "Put off for"), span, " ", button);
  }

  return { el, update };
}
