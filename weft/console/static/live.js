// The live feed: Weft's /api/ws, subscribed to the topics the views show, reconnecting
// with back-off. The token travels as the subprotocol pair ("bearer", token), never in the URL
// unless the browser refuses it as a subprotocol (characters a subprotocol may not hold).

const TOPICS = "work,agents,targets,questions";
const STATS_INTERVAL_S = 5;

export class Live {
  constructor({ token, project, onEvent, onStats, onOpen, onClose, onRefused }) {
    this.token = token;
    this.project = project;
    this.handlers = { onEvent, onStats, onOpen, onClose, onRefused };
    this.delay = 500;
    this.stopped = false;
    this.everOpened = false;
  }

  url(withToken) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams({ topics: TOPICS });
    if (this.project) query.set("project", this.project);
    if (withToken) query.set("token", this.token);
    return `${scheme}://${location.host}/api/ws?${query}`;
  }

  open() {
    let ws;
    if (!this.token) ws = new WebSocket(this.url(false));
    else {
      try {
        ws = new WebSocket(this.url(false), ["bearer", this.token]);
      } catch {
        ws = new WebSocket(this.url(true));
      }
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.everOpened = true;
      this.delay = 500;
      ws.send(JSON.stringify({ type: "subscribe", topic: "stats", id: "console-stats", filters: { interval_s: STATS_INTERVAL_S } }));
      // a topic of its own message: a Weft without leases answers it with an error frame
      // (ignored), where naming it in the URL would refuse the whole connection
      ws.send(JSON.stringify({ type: "subscribe", topic: "leases", id: "console-leases" }));
      this.handlers.onOpen();
    };
    ws.onmessage = (message) => {
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === "event") this.handlers.onEvent(frame.event);
      else if (frame.type === "stats") this.handlers.onStats(frame.stats);
      else if (frame.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
      else if (frame.type === "lagged") this.handlers.onOpen(); // events were skipped: read everything again
    };
    ws.onclose = () => {
      if (this.stopped) return;
      this.handlers.onClose();
      if (!opened && !this.everOpened) this.handlers.onRefused();
      setTimeout(() => this.stopped || this.open(), this.delay);
      this.delay = Math.min(10000, this.delay * 2);
    };
  }

  close() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }
}
