"""The page's store, imported into the browser as the page imports it: events applied in
any order leave the newest copy, agents' effective status follows their events, a whole
read answered after events heard on its way keeps what they said, and the hour's
throughput is counted per minute; an agent event older (by registry revision) than the
copy held changes nothing. No server data needed beyond the page itself."""

from __future__ import annotations

from typing import Any

import pytest
from console_helpers import ConsoleWeft, Tab

pytestmark = pytest.mark.timeout(60)

CHECKS = """async () => {
  const { Store } = await import('/console/store.js');
  const store = new Store();
  const item = (status, updated, extra = {}) => ({ id: 'w'.repeat(32), status, updated_at: updated,
    created_at: '2026-01-01T00:00:00Z', assigned_to: 'a'.repeat(32), ...extra });
  const out = {};
  store.apply({ kind: 'work', action: 'claimed', data: { item: item('claimed', '2026-01-01T00:00:02Z') } });
  store.upsertWork(item('queued', '2026-01-01T00:00:01Z'));  // a snapshot older than the event
  out.kept = store.work.get('w'.repeat(32)).status;
  out.held = (store.heldBy().get('a'.repeat(32)) || []).length;
  const cancelled = item('cancelled', '2026-01-01T00:00:03Z');
  store.apply({ kind: 'work', action: 'cancelled', data: { item: cancelled } });
  out.after = store.work.get('w'.repeat(32)).status;
  out.heldAfter = (store.heldBy().get('a'.repeat(32)) || []).length;

  const agent = { agent_id: 'b'.repeat(32), handle: 'bee', status: 'online', capabilities: [] };
  const about = { kind: 'agent', subject_id: agent.agent_id };
  store.apply({ ...about, action: 'registered', data: { agent, status: 'online' } });
  // heartbeats stopped: Weft says offline while the entry still says online
  store.apply({ ...about, action: 'offline', data: { agent, status: 'offline' } });
  out.agent = [store.agents.get(agent.agent_id).status, store.agents.get(agent.agent_id).stale];
  store.apply({ kind: 'agent', action: 'deregistered', subject_id: agent.agent_id, data: {} });
  out.gone = store.agents.has(agent.agent_id);

  // whole reads answered after events heard on the way: the events are applied over them
  const fleet = new Store();
  const cee = { agent_id: 'c'.repeat(32), handle: 'cee', status: 'online', capabilities: [],
    last_heartbeat: '2026-01-01T00:00:05Z' };
  const dee = { ...cee, agent_id: 'd'.repeat(32), handle: 'dee' };
  const heard = (action, agent) => fleet.apply({ kind: 'agent', subject_id: agent.agent_id, action,
    data: action === 'deregistered' ? {} : { agent, status: agent.status } });
  const first = fleet.beginRead('agents');
  heard('registered', cee);
  const second = fleet.beginRead('agents');
  heard('registered', dee);
  fleet.setAgents([], first);  // read before either registered
  out.first = [...fleet.agents.keys()].map((id) => id[0]).sort().join('');
  fleet.setAgents([cee], second);  // read between the two
  out.second = [...fleet.agents.keys()].map((id) => id[0]).sort().join('');
  out.keptAfter = fleet.heard.agents.events.length;
  const third = fleet.beginRead('agents');
  heard('deregistered', cee);
  heard('busy', { ...dee, status: 'busy', last_heartbeat: '2026-01-01T00:00:01Z' });
  fleet.setAgents([cee, { ...dee, last_heartbeat: '2026-01-01T00:00:09Z' }], third);
  const d = fleet.agents.get(dee.agent_id);
  out.third = [fleet.agents.has(cee.agent_id), d.status, d.last_heartbeat];
  const failed = fleet.beginRead('agents');
  fleet.endRead(failed);
  heard('registered', cee);
  out.keptIdle = fleet.heard.agents.events.length;
  fleet.setAgents([]);  // a read that began before the feed opened: nothing to apply over it
  out.plain = fleet.agents.size;

  // each agent event says the registry revision of its entry: an older one changes nothing
  const byRevision = new Store();
  const eff = { ...cee, agent_id: 'e'.repeat(32), handle: 'eff' };
  const told = (action, agent, status, revision) => byRevision.apply({ kind: 'agent',
    subject_id: eff.agent_id, action,
    data: action === 'deregistered' ? { revision } : { agent, status, revision } });
  const stopped = { ...eff, status: 'offline' };
  told('registered', eff, 'online', 3);
  told('offline', stopped, 'offline', 5);  // it left; then the request for it, told late
  told('shutdown-requested', eff, 'online', 3);
  const e = () => byRevision.agents.get(eff.agent_id);
  out.revisions = [[e().status, e().reported_status, e().revision]];
  const reread = byRevision.beginRead('agents');
  told('registered', eff, 'online', 7);  // heard on the read's way; the read is newer
  byRevision.setAgents([{ ...stopped, status: 'offline', reported_status: 'offline', revision: 8 }], reread);
  out.revisions.push([e().status, e().revision]);
  told('deregistered', null, null, 6);  // an older copy's removal
  out.revisions.push(byRevision.agents.has(eff.agent_id));
  told('deregistered', null, null, 8);
  out.revisions.push(byRevision.agents.has(eff.agent_id));

  const now = Date.parse('2026-01-01T12:00:00Z');
  const done = (n, minutesAgo) => ({ id: String(n).padStart(32, '0'), status: 'completed',
    updated_at: '2026-01-01T12:00:00Z', created_at: '2026-01-01T11:00:00Z',
    finished_at: new Date(now - minutesAgo * 60000 - 1000).toISOString() });
  store.addWork([done(1, 0), done(2, 0), done(3, 30), done(4, 61)]);
  const bars = store.throughput(now);
  out.bars = [bars.length, bars[59], bars[29], bars.reduce((a, b) => a + b, 0)];

  const ordered = new Store();
  const at = (id, created) => ({ id, status: 'queued', created_at: created, updated_at: created });
  ordered.addWork([at('b', '2026-01-01T00:00:02Z'), at('a', '2026-01-01T00:00:01Z')]);
  const ids = () => ordered.workNewestFirst().map((i) => i.id).join('');
  out.order = [ids()];
  ordered.upsertWork(at('c', '2026-01-01T00:00:03Z'));  // the newest: first, no sort
  out.order.push(ids());
  ordered.upsertWork(at('x', '2026-01-01T00:00:00Z'));  // an older one: sorted in
  out.order.push(ids());
  const claimed = { ...at('b', '2026-01-01T00:00:02Z'), status: 'claimed' };
  ordered.upsertWork({ ...claimed, updated_at: '2026-01-01T00:00:09Z' });  // changed: stays put
  out.order.push(ids(), ordered.workNewestFirst()[1].status);
  const { ago } = await import('/console/dom.js');
  const base = Date.parse('2026-01-01T12:00:00Z');
  out.ago = ['2026-01-01T11:59:30Z', '2026-01-01T11:00:00Z', '2026-01-01T12:00:01Z',
    '2026-01-01T12:05:00Z', '2026-01-01T14:00:00Z', null].map((t) => ago(t, base));
  return out;
}"""


async def test_the_store_keeps_the_newest_copy_and_counts_the_hour(
    console_weft: ConsoleWeft, tab: Tab
) -> None:
    await tab.page.goto(f"{console_weft.url}/console/index.html")
    out: dict[str, Any] = await tab.page.evaluate(CHECKS)
    assert out["kept"] == "claimed" and out["held"] == 1
    assert out["after"] == "cancelled" and out["heldAfter"] == 0
    assert out["agent"] == ["offline", True]
    assert out["gone"] is False
    assert out["first"] == "cd" and out["second"] == "cd" and out["keptAfter"] == 0
    assert out["third"] == [False, "busy", "2026-01-01T00:00:09Z"]
    assert out["keptIdle"] == 0 and out["plain"] == 0
    assert out["revisions"] == [["offline", "offline", 5], ["offline", 8], True, False]
    assert out["bars"] == [60, 2, 1, 3]
    assert out["order"] == ["ba", "cba", "cbax", "cbax", "claimed"]
    assert out["ago"] == ["30 s ago", "1 h ago", "just now", "in 5 min", "in 2 h", "-"]
