// What the console knows of the project: filled from the REST API, kept current by events.
// Changes mark the store dirty; the page redraws once per animation frame, however many
// events arrived in it.

export const HOLDING = new Set(["claimed", "in-progress", "waiting-on-operator", "reviewing", "merging"]);
export const FINAL = new Set(["completed", "cancelled", "expired", "dead-lettered"]);
const HOUR_MS = 3600 * 1000;

function stamp(iso) {
  const value = Date.parse(iso || "");
  return Number.isNaN(value) ? 0 : value;
}

// The collection an event changes that is also read whole over HTTP (see beginRead).
const READ_WHOLE = { agent: "agents", target: "targets", question: "questions", lease: "leases" };

export class Store {
  constructor() {
    this.agents = new Map();
    this.work = new Map();
    this._order = null; // work ids newest first (null: sort again)
    this.targets = new Map();
    this.spinups = new Map();
    this.questions = new Map();
    this.leases = new Map();
    this.protocolAgents = []; // agents of Synadia's Agent Protocol that are not Loom's (docs/interop.md)
    this.stats = null;
    this.depthSamples = []; // [{t, depth}] for the last hour
    this.loaded = { agents: false, work: false, targets: false, questions: false };
    this.revision = { agents: 0, work: 0, targets: 0, spinups: 0, questions: 0, stats: 0, leases: 0 };
    this.listeners = new Set();
    this.scheduled = false;
    this.lastEventAt = null;
    this.heard = {}; // collection -> { readers, events } while a whole read of it is on its way
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  changed(kind) {
    this.revision[kind] += 1;
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      for (const listener of this.listeners) listener();
    });
  }

  // -- snapshots ------------------------------------------------------------------------

  // A whole read answers with the collection as it was when Weft read it, which may be older
  // than events heard while the answer was on its way (an agent registered in between would
  // vanish). So the events heard from a read's start are kept and applied again over it.

  /** A whole read of ``collection`` (agents, targets, questions, leases) starts. */
  beginRead(collection) {
    const log = (this.heard[collection] ||= { readers: 0, events: [] });
    log.readers += 1;
    return { collection, from: log.events.length, open: true };
  }

  /** The read ended (answered or failed): stop keeping events for it. */
  endRead(read) {
    if (!read || !read.open) return [];
    read.open = false;
    const log = this.heard[read.collection];
    const since = log.events.slice(read.from);
    log.readers -= 1;
    if (log.readers === 0) log.events = [];
    return since;
  }

  replaySince(read) {
    for (const event of this.endRead(read)) this.apply(event, false);
  }

  setAgents(items, read = null) {
    this.agents = new Map(items.map((a) => [a.agent_id, a]));
    this.replaySince(read);
    this.loaded.agents = true;
    this.changed("agents");
  }

  setProtocolAgents(items) {
    this.protocolAgents = items;
    this.changed("agents");
  }

  addWork(items) {
    for (const item of items) this.upsertWork(item, false);
    this.changed("work");
  }

  setTargets(items, read = null) {
    this.targets = new Map(items.map((t) => [t.id, t]));
    this.replaySince(read);
    this.loaded.targets = true;
    this.changed("targets");
  }

  setQuestions(items, read = null) {
    this.questions = new Map(items.map((q) => [q.id, q]));
    this.replaySince(read);
    this.loaded.questions = true;
    this.changed("questions");
  }

  setLeases(items, read = null) {
    this.leases = new Map(items.map((l) => [l.id, l]));
    this.replaySince(read);
    this.changed("leases");
  }

  dropLease(id) {
    this.leases.delete(id);
    this.changed("leases");
  }

  setStats(stats) {
    this.stats = stats;
    const depth = Object.values(stats.queue_depths || {}).reduce((a, b) => a + b, 0);
    const now = Date.now();
    this.depthSamples.push({ t: now, depth });
    while (this.depthSamples.length && this.depthSamples[0].t < now - HOUR_MS) this.depthSamples.shift();
    this.changed("stats");
  }

  // -- events ---------------------------------------------------------------------------

  upsertWork(item, notify = true) {
    const known = this.work.get(item.id);
    if (known && stamp(known.updated_at) > stamp(item.updated_at)) return; // an older copy
    this.work.set(item.id, item);
    if (!known && this._order) {
      // a new item is almost always the newest: put it first; anything else sorts again
      const first = this._order.length ? this.work.get(this._order[0]) : null;
      if (!first || stamp(item.created_at) >= stamp(first.created_at)) this._order.unshift(item.id);
      else this._order = null;
    }
    if (notify) this.changed("work");
  }

  apply(event, fresh = true) {
    const data = event.data || {};
    if (fresh) {
      this.lastEventAt = event.at;
      const log = this.heard[READ_WHOLE[event.kind]];
      if (log && log.readers > 0) log.events.push(event);
    }
    switch (event.kind) {
      case "work":
        if (data.item) this.upsertWork(data.item);
        break;
      case "agent":
        if (this.olderAgent(event)) break;
        if (event.action === "deregistered") this.agents.delete(event.subject_id);
        else if (data.agent) {
          const status = data.status || data.agent.status;
          const known = this.agents.get(event.subject_id);
          const view = { ...known, ...data.agent, status };
          // an event applied again over a newer read must not move the heartbeat back
          if (known && stamp(known.last_heartbeat) > stamp(view.last_heartbeat)) view.last_heartbeat = known.last_heartbeat;
          view.reported_status = data.agent.status;
          view.stale = status === "offline" && data.agent.status !== "offline";
          if (data.revision != null) view.revision = data.revision;
          this.agents.set(data.agent.agent_id, view);
        }
        this.changed("agents");
        break;
      case "target":
        if (event.action === "deleted") this.targets.delete(event.subject_id);
        else if (data.target) this.targets.set(data.target.id, data.target);
        this.changed("targets");
        break;
      case "spinup":
        if (data.operation) this.spinups.set(data.operation.id, data.operation);
        this.changed("spinups");
        break;
      case "lease":
        // acquired and renewed carry the lease as it now is; every other action ends it
        if (["acquired", "renewed"].includes(event.action) && data.lease) this.leases.set(data.lease.id, data.lease);
        else this.leases.delete(event.subject_id);
        this.changed("leases");
        break;
      case "question":
        if (data.question) this.questions.set(data.question.id, data.question);
        this.changed("questions");
        break;
      default:
        break;
    }
  }

  /** An agent event tells of one registry revision of the agent (``data.revision``); one older
   * than the copy held changes nothing: events of one agent can arrive out of revision order
   * (two Weft replicas relay changes; a whole read can be newer than the events replayed over
   * it), and an older copy applied last put a stopped agent back online. */
  olderAgent(event) {
    const known = this.agents.get(event.subject_id);
    const revision = (event.data || {}).revision;
    return Boolean(known) && revision != null && known.revision != null && revision < known.revision;
  }

  // -- derived --------------------------------------------------------------------------

  /** agent id -> the items it holds (claimed, in progress, waiting, reviewing). */
  heldBy() {
    if (this._held && this._heldRev === this.revision.work) return this._held;
    const held = new Map();
    for (const item of this.work.values()) {
      if (!item.assigned_to || !HOLDING.has(item.status)) continue;
      const list = held.get(item.assigned_to) || [];
      list.push(item);
      held.set(item.assigned_to, list);
    }
    this._held = held;
    this._heldRev = this.revision.work;
    return held;
  }

  /** Work newest first. The order of ids is kept between changes (a change to an item does
   * not move it; a new one goes first), so an event costs no sort of every record. */
  workNewestFirst() {
    if (this._sorted && this._sortedRev === this.revision.work) return this._sorted;
    if (!this._order) {
      const keyed = [...this.work.values()].map((item) => [stamp(item.created_at), item.id]);
      keyed.sort((a, b) => b[0] - a[0]);
      this._order = keyed.map(([, id]) => id);
    }
    this._sorted = this._order.map((id) => this.work.get(id));
    this._sortedRev = this.revision.work;
    return this._sorted;
  }

  /** Items completed in each of the last 60 minutes (oldest first). */
  throughput(now = Date.now()) {
    const buckets = new Array(60).fill(0);
    for (const item of this.work.values()) {
      if (item.status !== "completed" || !item.finished_at) continue;
      const age = now - stamp(item.finished_at);
      if (age < 0 || age >= HOUR_MS) continue;
      buckets[59 - Math.floor(age / 60000)] += 1;
    }
    return buckets;
  }

  handleOf(agentId) {
    const agent = agentId ? this.agents.get(agentId) : null;
    return agent ? agent.handle : agentId ? agentId.slice(0, 8) : "-";
  }
}
