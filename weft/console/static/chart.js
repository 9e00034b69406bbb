// The last hour at a glance: items completed per minute (bars) and total queue depth (line),
// drawn as inline SVG from what the store holds. No chart library.

import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 600;
const H = 120;
const PAD = 18;

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

export class HourChart {
  constructor() {
    this.graphic = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", preserveAspectRatio: "none" });
    this.summary = h("p", { class: "legend" });
    this.el = h(
      "figure",
      { class: "chart" },
      h("figcaption", null, "Last hour: throughput and queue depth"),
      this.graphic,
      this.summary,
    );
  }

  update(store, now = Date.now()) {
    const bars = store.throughput(now);
    const samples = store.depthSamples;
    const maxBar = Math.max(1, ...bars);
    const maxDepth = Math.max(1, ...samples.map((s) => s.depth));
    const plotH = H - PAD;
    const slot = W / bars.length;
    const nodes = [svg("line", { class: "axis", x1: 0, y1: plotH, x2: W, y2: plotH })];
    bars.forEach((count, i) => {
      if (count === 0) return;
      const height = (count / maxBar) * (plotH - 4);
      nodes.push(svg("rect", { class: "bar", x: i * slot + 1, y: plotH - height, width: Math.max(1, slot - 2), height }));
    });
    if (samples.length > 0) {
      const points = samples.map((s) => {
        const x = W - ((now - s.t) / 3600000) * W;
        const y = plotH - (s.depth / maxDepth) * (plotH - 4);
        return `${x.toFixed(1)},${y.toFixed(1)}`;
      });
      if (points.length === 1) points.push(`${W},${points[0].split(",")[1]}`);
      nodes.push(svg("polyline", { class: "line", points: points.join(" ") }));
    }
    const left = svg("text", { x: 2, y: H - 4 });
    left.textContent = "60 min ago";
    const right = svg("text", { x: W - 2, y: H - 4, "text-anchor": "end" });
    right.textContent = "now";
    nodes.push(left, right);
    this.graphic.replaceChildren(...nodes);
    const completed = bars.reduce((a, b) => a + b, 0);
    const depth = samples.length ? samples[samples.length - 1].depth : 0;
    const text = `${completed} completed in the last hour (peak ${Math.max(...bars)} a minute); queue depth now ${depth}, at most ${samples.length ? maxDepth : 0} since this page opened`;
    this.graphic.setAttribute("aria-label", text);
    this.summary.replaceChildren(
      h("span", { class: "k-bar" }, `completed per minute (${completed} in the hour)`),
      h("span", { class: "k-line" }, `queue depth (now ${depth})`),
    );
  }
}
