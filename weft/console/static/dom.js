// Small DOM helpers. Text always goes in through textContent: nothing the API returns is
// ever parsed as HTML.

const listening = new WeakSet(); // elements given a listener here (see patch)

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
      listening.add(el);
    }
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** Make ``el``'s children the given ones, keeping every node already there that would be drawn
 * the same. Live updates draw a region again every few seconds (a clock moves "5 s ago" on);
 * a region drawn anew would replace its buttons, and a press spanning the redraw (down on the
 * old button, up on the new) is lost, for a person as for a test. A row whose only change is
 * its clock keeps its button; a control drawn differently is replaced whole (its listeners
 * hold what it acts on), and text in the field a person types in is theirs, not an attribute. */
export function patch(el, ...children) {
  const next = document.createDocumentFragment();
  append(next, children);
  patchChildren(el, [...next.childNodes]);
}

// Elements whose listeners act on what they were drawn from: kept only when drawn the same.
const CONTROLS = new Set(["A", "BUTTON", "FORM", "INPUT", "SELECT", "TEXTAREA"]);

function patchChildren(parent, wanted) {
  const unused = new Map(); // a node's kind and attributes -> the old nodes of that kind, in order
  for (const node of parent.childNodes) {
    const kind = kindOf(node);
    if (!unused.has(kind)) unused.set(kind, []);
    unused.get(kind).push(node);
  }
  const result = wanted.map((node) => {
    const old = unused.get(kindOf(node))?.shift();
    return old ? patchNode(old, node) : node;
  });
  result.forEach((node, i) => {
    const at = parent.childNodes[i];
    if (at !== node) parent.insertBefore(node, at || null);
  });
  while (parent.childNodes.length > result.length) parent.lastChild.remove();
}

function patchNode(old, node) {
  if (old.isEqualNode(node)) return old;
  if (old.nodeType !== Node.ELEMENT_NODE) {
    old.nodeValue = node.nodeValue;
    return old;
  }
  if (CONTROLS.has(old.tagName) || listening.has(old) || listening.has(node)) return node;
  patchChildren(old, [...node.childNodes]);
  return old;
}

function kindOf(node) {
  if (node.nodeType !== Node.ELEMENT_NODE) return `#${node.nodeType}`;
  const attributes = [...node.attributes].map((a) => `${a.name}=${a.value}`).sort();
  return `${node.tagName} ${JSON.stringify(attributes)}`;
}

export function statusText(value) {
  return h("span", { class: `status s-${String(value || "unknown")}` }, String(value || "-"));
}

export function tags(values) {
  if (!values || values.length === 0) return h("span", { class: "note" }, "none");
  return h("ul", { class: "tags" }, values.map((v) => h("li", null, v)));
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "-";
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  if (Number.isNaN(seconds)) return "-";
  if (seconds > -5 && seconds < 1) return "just now"; // (clocks a little apart)
  const span = Math.abs(seconds);
  const text =
    span < 60 ? `${span} s` : span < 3600 ? `${Math.floor(span / 60)} min` : span < 86400 ? `${Math.floor(span / 3600)} h` : `${Math.floor(span / 86400)} d`;
  return seconds < 0 ? `in ${text}` : `${text} ago`; // a deadline or an expiry is ahead
}

export function when(iso) {
  if (!iso) return "-";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "-" : date.toLocaleString();
}

export function time(iso, now = Date.now()) {
  return h("time", { datetime: iso || "", title: when(iso) }, ago(iso, now));
}

export function short(id) {
  return id ? String(id).slice(0, 8) : "-";
}

/** What a work item is, in one line: its description's first line, cut at ``width``. */
export function gist(description, width = 80) {
  const line = String(description || "").split("\n", 1)[0].trim();
  return line.length <= width ? line : `${line.slice(0, width - 1)}…`;
}

/** A table with a caption and column headers; fill ``tbody`` yourself. */
export function table(caption, headers) {
  const tbody = h("tbody");
  const el = h(
    "table",
    null,
    h("caption", null, caption),
    h("thead", null, h("tr", null, headers.map((t) => h("th", { scope: "col", class: numeric(t) ? "num" : null }, t)))),
    tbody,
  );
  return { el, tbody };
}

function numeric(header) {
  return ["Priority", "Attempts", "Depth", "Waiting", "Count", "Max", "Agents", "Online", "Busy", "Offline"].includes(header);
}

/** A labelled select; ``options`` are [value, label] pairs. */
export function select(id, label, options, value, onchange) {
  const el = h("select", { id, onchange: () => onchange(el.value) });
  fillOptions(el, options, value);
  return { wrap: h("div", null, h("label", { for: id }, label), el), el };
}

/** Give the select ``options`` and the value ``value`` (or the one it has), or the first.
 * Options listed the same are kept (``patch``): a live update (the fleet's every 5 s) must
 * not close a list a person has open, nor move what they picked. */
export function fillOptions(el, options, value) {
  const current = value ?? el.value;
  patch(el, options.map(([v, l]) => h("option", { value: v }, l)));
  const wanted = options.some(([v]) => v === current) ? current : options[0]?.[0] ?? "";
  if (el.value !== wanted) el.value = wanted;
}

/** Paging controls over a list of ``pageSize`` rows. */
export class Pager {
  constructor(label, pageSize = 100) {
    this.page = 0;
    this.pageSize = pageSize;
    this.info = h("span", { "aria-live": "polite" });
    this.prev = h("button", { type: "button", class: "secondary", onclick: () => this.go(-1) }, "Previous page");
    this.next = h("button", { type: "button", class: "secondary", onclick: () => this.go(1) }, "Next page");
    this.el = h("div", { class: "pager", role: "group", "aria-label": `${label} pages` }, this.prev, this.info, this.next);
    this.onchange = () => {};
  }

  go(step) {
    this.page = Math.max(0, this.page + step);
    this.onchange();
  }

  /** The rows of the current page of ``rows`` (and the controls updated). */
  slice(rows, noun) {
    const pages = Math.max(1, Math.ceil(rows.length / this.pageSize));
    if (this.page >= pages) this.page = pages - 1;
    const start = this.page * this.pageSize;
    const end = Math.min(rows.length, start + this.pageSize);
    this.info.textContent = rows.length === 0 ? `no ${noun}` : `${start + 1}–${end} of ${rows.length} ${noun}`;
    this.prev.disabled = this.page === 0;
    this.next.disabled = end >= rows.length;
    return rows.slice(start, end);
  }
}

/** A button that asks for a second click before it acts (no modal dialog). ``key`` names the
 * action, so a redraw in between keeps the button armed (and focused, with ``keepFocus``). */
const armed = new Map(); // key -> time the arming lapses
const CONFIRM_MS = 6000;

export function confirmButton(label, confirmLabel, action, key, what = "") {
  const isArmed = () => (armed.get(key) || 0) > Date.now();
  // the visible text says what pressing does now; what it acts on is there for screen readers
  const say = (text) => [text, what ? h("span", { class: "visually-hidden" }, ` ${what}`) : null];
  const el = h("button", { type: "button", class: "danger", dataset: { focusKey: key } }, say(isArmed() ? confirmLabel : label));
  // not confirmed in time: the button says again what a press does
  const disarmLater = () =>
    setTimeout(() => {
      if (!isArmed() && el.isConnected) replace(el, say(label));
    }, (armed.get(key) || 0) - Date.now() + 50);
  if (isArmed()) disarmLater(); // drawn again while armed
  el.addEventListener("click", async () => {
    if (!isArmed()) {
      armed.set(key, Date.now() + CONFIRM_MS);
      replace(el, say(confirmLabel));
      disarmLater();
      return;
    }
    armed.delete(key);
    el.disabled = true;
    replace(el, say(label));
    try {
      await action();
    } finally {
      el.disabled = false;
    }
  });
  return el;
}

/** Redraw ``container`` with ``draw()`` and give focus back to the element that had it
 * (matched by ``data-focus-key``): live updates must not throw a keyboard user out. */
export function keepFocus(container, draw) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focusKey : null;
  draw();
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}
