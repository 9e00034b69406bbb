// Questions agents asked the operator: answer the open ones here.

import { h, keepFocus, replace, short, statusText, table, time, when } from "../dom.js";

export function questionsView(ctx) {
  const { store, api } = ctx;
  const open = h("div", { id: "open-questions" });
  const past = table("Answered and expired", ["Question", "Asked by", "Status", "Answer", "Resolved"]);
  const el = h("div", null, h("h3", null, "Waiting for an answer"), open, past.el);
  const drafts = new Map(); // question id -> what the operator typed so far

  function update() {
    const now = Date.now();
    const all = [...store.questions.values()].sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
    const waiting = all.filter((q) => q.status === "open");
    keepFocus(open, () => replace(open, !store.loaded.questions
      ? h("p", { class: "note" }, "Reading the questions…")
      : waiting.length === 0 ? h("p", { class: "note" }, "No agent is waiting for an answer.")
        : waiting.map((q) => answerForm(q, now))));
    replace(past.tbody, all.filter((q) => q.status !== "open").slice(0, 200).map((q) => h("tr", null,
      h("th", { scope: "row" }, q.question), h("td", null, q.asked_by_handle || short(q.asked_by)),
      h("td", null, statusText(q.status)), h("td", null, q.answer ?? q.resolution ?? "-"), h("td", null, when(q.resolved_at)))));
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
      h("button", { type: "submit", dataset: { focusKey: `${id}-send` } }, "Send answer"));
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
    return h("article", { class: "question", dataset: { questionId: q.id } },
      h("p", null, h("strong", null, q.question)),
      h("p", { class: "note" }, `asked by ${q.asked_by_handle || short(q.asked_by)} `, time(q.created_at, now),
        q.work_id ? [" about ", h("a", { href: `#work/${q.work_id}` }, "its work item")] : null,
        q.deadline ? ` · answer before ${when(q.deadline)}` : null),
      form);
  }

  return { el, update };
}
