// The fleet's pages of the approval app: the city map, a server's page,
// incidents, security and the audit, and the context on each approval
// card. Everything from the fleet or the AI is untrusted text: it reaches
// the page through textContent and setAttribute (h below), never as HTML.
'use strict';

// app.js calls this with its API helper once, and routes to it.
window.gridcityPages = ({ api }) => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const SVG = 'http://www.w3.org/2000/svg';

  // h makes an element: props are attributes (class, href, aria-*), text
  // (textContent) or on* listeners; children are nodes or strings (text).
  function h(tag, props, ...kids) {
    const svg = tag.startsWith('svg:');
    const el = svg ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat(Infinity)) if (c !== null && c !== undefined && c !== false && c !== '') el.append(c instanceof Node ? c : String(c));
    return el;
  }

  // put replaces el's children with kids, as h adds them.
  function put(el, ...kids) {
    el.replaceChildren(...kids.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false && c !== ''));
  }

  // ---- formatting ----

  const pct = (x) => (x === null || x === undefined ? '—' : `${Math.round(x * 10) / 10}%`);
  function bytes(n) {
    if (!n) return '0 B';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${n >= 100 || i === 0 ? Math.round(n) : n.toFixed(1)} ${u[i]}`;
  }
  const when = (s) => (s ? new Date(s).toLocaleString() : '');
  function span(sec) {
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return `${sec} s`;
    if (sec < 3600) return `${Math.floor(sec / 60)} min`;
    if (sec < 86400) return `${Math.floor(sec / 3600)} h ${Math.floor((sec % 3600) / 60)} min`;
    return `${Math.floor(sec / 86400)} d ${Math.floor((sec % 86400) / 3600)} h`;
  }
  const serverHref = (name) => `#servers/${encodeURIComponent(name)}`;

  // A status is never told by colour alone: each has a glyph and its word.
  const GLYPH = { online: '✓', ok: '✓', reconnecting: '◐', degraded: '◐', offline: '✕', failed: '✕', revoked: '⊘', unknown: '?' };
  function tone(status, troubled) {
    if (troubled || status === 'offline' || status === 'failed' || status === 'revoked') return 'bad';
    if (status === 'online' || status === 'ok') return 'ok';
    return 'warn';
  }
  function statusBadge(status, troubled) {
    return h('span', { class: `st ${tone(status, troubled)}` }, h('span', { class: 'glyph', 'aria-hidden': 'true', text: GLYPH[status] || '!' }), ` ${status || 'unknown'}`);
  }

  function dl(rows) {
    return h('dl', { class: 'facts' }, rows.filter((r) => r && r[1] !== '' && r[1] !== null && r[1] !== undefined)
      .map(([k, v]) => h('div', { class: 'row' }, h('dt', { text: k }), h('dd', {}, v))));
  }
  function table(caption, head, rows) {
    if (!rows.length) return null;
    return h('div', { class: 'scroll' }, h('table', {}, h('caption', { text: caption }),
      h('thead', {}, h('tr', {}, head.map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c)))))));
  }
  const section = (title, ...kids) => h('section', { class: 'panel' }, h('h2', { text: title }), ...kids);
  const empty = (text) => h('p', { class: 'muted', text });
  const link = (name, isServer = true) => (isServer ? h('a', { href: serverHref(name), text: name }) : h('span', { text: name }));
  function list(names, isServer) {
    if (!names || !names.length) return h('span', { class: 'muted', text: 'none' });
    return h('span', { class: 'names' }, names.map((n, i) => [i ? ', ' : '', link(n, isServer(n))]));
  }

  // ---- page plumbing ----

  const page = { name: '', nav: 0, timer: 0, refresh: null, fleetRefresh: null };
  const VIEWS = { map: 'map-view', server: 'server-view', incidents: 'incidents-view', security: 'security-view', audit: 'audit-view' };

  function ready(name) { document.body.dataset.ready = name; }

  // route shows the page of a hash and answers its view's id, or '' for a
  // hash that is not one of these pages.
  function route(hash) {
    leave();
    const [path, query] = hash.replace(/^#/, '').split('?');
    const params = new URLSearchParams(query || '');
    const nav = page.nav;
    if (path === 'map') return open('map', nav, loadMap);
    if (path.startsWith('servers/')) {
      const name = decodeURIComponent(path.slice('servers/'.length));
      return open('server', nav, (n) => loadServer(n, name));
    }
    if (path === 'incidents') return open('incidents', nav, loadIncidents);
    if (path === 'security') return open('security', nav, loadSecurity);
    if (path === 'audit') return open('audit', nav, (n) => loadAudit(n, params));
    return '';
  }

  function open(name, nav, load) {
    page.name = name;
    const err = $(`#${VIEWS[name]} .page-error`);
    if (err) err.textContent = '';
    load(nav);
    return VIEWS[name];
  }

  // leave stops what the open page was doing; its late answers are dropped.
  function leave() {
    page.nav++;
    page.name = '';
    clearInterval(page.timer);
    page.refresh = null;
    page.fleetRefresh = null;
    delete document.body.dataset.ready;
  }

  // every refreshes an open page: figures like CPU change without an event.
  function every(nav, fn) {
    page.refresh = fn;
    page.timer = setInterval(() => { if (page.nav === nav) fn(); }, 30000);
  }

  function fail(view, what, e) {
    if (e.status === 401) return;
    const el = $(`#${view} .page-error`);
    el.textContent = `Could not load ${what}: ${e.message}`;
  }

  // get fetches for a page and answers null when the page was left meanwhile.
  async function get(nav, path) {
    const v = await api('GET', path);
    return page.nav === nav ? v : null;
  }

  // ---- the city map ----

  const map = { data: null, expanded: new Set(), drawn: 0 };
  // Districts with more members than this are drawn as counts (and their
  // troubled members) on a large fleet.
  const COLLAPSE_OVER = 24;
  const LARGE_FLEET = 150;
  const MAP_INCIDENTS = 3;

  async function fetchFleet(nav) {
    let all = null;
    let after = '';
    do {
      const p = await get(nav, `/api/fleet${after ? `?after=${encodeURIComponent(after)}` : ''}`);
      if (!p) return null;
      if (!all) all = p;
      else {
        all.targets.push(...p.targets);
        all.links.push(...p.links);
      }
      after = p.nextAfter || '';
    } while (after);
    // Links of a target on two pages came twice.
    const seen = new Set();
    all.links = all.links.filter((l) => { const k = `${l.from}\n${l.to}`; if (seen.has(k)) return false; seen.add(k); return true; });
    return all;
  }

  async function loadMap(nav) {
    const draw = async () => {
      try {
        const f = await fetchFleet(nav);
        if (!f) return;
        map.data = f;
        renderMap();
        ready('map');
      } catch (e) { fail('map-view', 'the map', e); }
    };
    page.fleetRefresh = draw;
    every(nav, draw);
    await draw();
  }

  function tileLabel(t) {
    const parts = [`${t.name}, ${t.kind}, ${t.status}`];
    if (t.rootCause) parts.push('root cause of an incident');
    if (t.explainedBy) parts.push(`explained by ${t.explainedBy}`);
    if (t.atRiskFrom) parts.push(`at risk from ${t.atRiskFrom}`);
    if (t.reason) parts.push(t.reason);
    if (t.why && t.why.length) parts.push(t.why.join('; '));
    return parts.join(' — ');
  }

  function tile(t) {
    const cls = ['tile', tone(t.status, t.troubled)];
    if (t.rootCause) cls.push('root');
    if (t.explainedBy) cls.push('explained');
    if (t.atRiskFrom) cls.push('atrisk');
    const figs = t.kind === 'server' && t.cpu !== undefined
      ? `cpu ${pct(t.cpu)} · mem ${pct(t.mem)}${t.disk !== undefined ? ` · disk ${pct(t.disk)}` : ''}` : t.kind === 'server' ? t.status : `${t.kind} · ${t.status}`;
    let mark = '';
    if (t.rootCause) mark = '◎ root cause';
    else if (t.explainedBy) mark = `↳ ${t.explainedBy}`;
    else if (t.atRiskFrom) mark = `⚠ at risk`;
    const label = tileLabel(t);
    const props = { class: cls.join(' '), 'data-id': t.id, title: label, 'aria-label': label };
    const kids = [h('span', { class: 'glyph', 'aria-hidden': 'true', text: GLYPH[t.status] || '!' }),
      h('span', { class: 'tname', text: t.name }), h('span', { class: 'tfig', text: figs }), mark && h('span', { class: 'tmark', text: mark })];
    if (t.kind === 'server') return h('a', { ...props, href: serverHref(t.name) }, kids);
    return h('span', { ...props, role: 'img' }, kids);
  }

  function renderMap() {
    const f = map.data;
    const large = f.targetsTotal > LARGE_FLEET;
    const servers = f.targets.filter((t) => t.kind === 'server').length;
    const statuses = Object.entries(f.byStatus || {}).sort().map(([s, n]) => [h('span', { class: 'sep', text: ' · ' }), statusBadge(s), ` ${n}`]);
    put($('#map-summary'),
      h('span', { text: `${f.total} servers` }), ...statuses.flat(),
      h('span', { text: ` · ${f.targetsTotal - servers} resources · ${f.healthy} healthy · ${f.incidents.length} open incident${f.incidents.length === 1 ? '' : 's'}` }));
    put($('#map-gaps'), ...(f.gaps || []).map((g) => h('p', { class: 'notice-inline', text: `${g.check}: ${g.reason}` })));
    // The largest incidents in full; on a troubled fleet the others fold
    // into a list, so that the city stays near the top.
    const rest = f.incidents.slice(MAP_INCIDENTS);
    put($('#map-incidents'), ...f.incidents.slice(0, MAP_INCIDENTS).map(incidentBox), rest.length ? h('details', { class: 'more-incidents' },
      h('summary', { text: `${rest.length} more open incident${rest.length === 1 ? '' : 's'}` }),
      h('ul', {}, rest.map((i) => h('li', {}, link(i.name || i.target, i.kind === 'server'), ' ', statusBadge(i.status, true), h('span', { class: 'muted', text: ` ${i.reason} · explains ${i.explainsCount} · ${i.atRiskCount} at risk` })))),
      h('p', {}, h('a', { href: '#incidents', text: 'All incidents' }))) : null);

    const byDistrict = new Map(f.districts.map((d) => [d.id, []]));
    const loose = [];
    for (const t of f.targets) (byDistrict.get(t.district) || loose).push(t);
    const blocks = f.districts.map((d) => district(d.id, d.name, byDistrict.get(d.id), large));
    if (loose.length) blocks.push(district('', 'No district', loose, large));
    put($('#map-districts'), ...blocks);
    searchMap();
    drawLinksSoon();
  }

  function incidentBox(inc) {
    const isServer = (id) => { const t = map.data && map.data.targets.find((x) => x.id === id); return !t || t.kind === 'server'; };
    return h('article', { class: 'incident' },
      h('h3', {}, h('span', { class: 'badge risky', text: 'root cause' }), ' ', link(inc.name || inc.target, inc.kind === 'server'), h('span', { class: 'muted', text: ` ${inc.kind}` }), ' ', statusBadge(inc.status, true)),
      h('p', { class: 'reason', text: inc.reason }),
      dl([
        ['Since', when(inc.since)],
        ['Explains', inc.explainsCount ? h('span', {}, list(inc.explains || [], isServer), inc.explainsCount > (inc.explains || []).length ? ` and ${inc.explainsCount - inc.explains.length} more` : '') : 'nothing else'],
        ['At risk', inc.atRiskCount ? h('span', {}, list(inc.atRisk || [], isServer), inc.atRiskCount > (inc.atRisk || []).length ? ` and ${inc.atRiskCount - inc.atRisk.length} more` : '') : 'nothing'],
      ]));
  }

  function district(id, name, members, large) {
    const troubled = members.filter((t) => t.troubled || t.atRiskFrom || t.rootCause);
    const collapsed = large && members.length > COLLAPSE_OVER && !map.expanded.has(id);
    const shown = collapsed ? troubled.slice(0, COLLAPSE_OVER) : members;
    const counts = {};
    for (const t of members) counts[t.status] = (counts[t.status] || 0) + 1;
    const headId = `district-${id || 'none'}`;
    const box = h('section', { class: `district${collapsed ? ' collapsed' : ''}`, 'data-id': id, 'aria-labelledby': headId },
      h('h2', { id: headId }, h('span', { text: name }), h('span', { class: 'muted dcount', text: ` ${members.length} · ${troubled.filter((t) => t.troubled).length} troubled` })));
    if (collapsed) {
      box.append(h('p', { class: 'counts' }, Object.entries(counts).sort().map(([s, n], i) => [i ? ' · ' : '', statusBadge(s), ` ${n}`])));
    }
    box.append(h('div', { class: 'tiles' }, shown.map(tile)));
    if (large && members.length > COLLAPSE_OVER) {
      const label = collapsed ? `Show all ${members.length} in ${name}` : `Show ${name} as counts`;
      box.append(h('button', { type: 'button', class: 'link expand', 'aria-expanded': String(!collapsed), text: label, onclick: () => {
        if (collapsed) map.expanded.add(id); else map.expanded.delete(id);
        renderMap();
      } }));
    }
    return box;
  }

  // The links are drawn over the laid-out tiles, to a district's block
  // when its end is folded into counts.
  let linkFrame = 0;
  function drawLinksSoon() {
    cancelAnimationFrame(linkFrame);
    linkFrame = requestAnimationFrame(drawLinks);
  }
  window.addEventListener('resize', () => { if (page.name === 'map') drawLinksSoon(); });

  function drawLinks() {
    const f = map.data;
    const box = $('#map-city');
    const svg = $('#map-links');
    if (!f || !box || box.offsetParent === null) return;
    const origin = box.getBoundingClientRect();
    const at = new Map();
    for (const el of box.querySelectorAll('.tile')) at.set(el.dataset.id, el);
    const districtOf = new Map(f.targets.map((t) => [t.id, t.district || '']));
    const blockOf = new Map([...box.querySelectorAll('.district')].map((el) => [el.dataset.id, el]));
    const incident = new Set();
    for (const t of f.targets) if (t.rootCause || t.explainedBy) incident.add(t.id);
    const centre = (el) => { const r = el.getBoundingClientRect(); return [r.left + r.width / 2 - origin.left, r.top + r.height / 2 - origin.top]; };
    const drawn = new Set();
    const lines = [];
    for (const l of f.links) {
      const a = at.get(l.from) || blockOf.get(districtOf.get(l.from));
      const b = at.get(l.to) || blockOf.get(districtOf.get(l.to));
      if (!a || !b || a === b) continue;
      const hot = incident.has(l.from) && incident.has(l.to);
      const key = `${a.dataset.id}|${b.dataset.id}|${hot}`;
      if (drawn.has(key) || lines.length > 4000) continue;
      drawn.add(key);
      const [x1, y1] = centre(a);
      const [x2, y2] = centre(b);
      lines.push(h('svg:line', { x1: x1.toFixed(1), y1: y1.toFixed(1), x2: x2.toFixed(1), y2: y2.toFixed(1), class: hot ? 'hot' : '' }));
    }
    svg.setAttribute('width', box.scrollWidth);
    svg.setAttribute('height', box.scrollHeight);
    put(svg, ...lines);
    map.drawn = lines.length;
    svg.dataset.lines = String(lines.length);
  }

  function searchMap() {
    const q = $('#map-search').value.trim().toLowerCase();
    const out = $('#map-found');
    if (!q || !map.data) {
      put(out);
      out.hidden = true;
      return;
    }
    const found = map.data.targets.filter((t) => t.name.toLowerCase().includes(q));
    found.sort((a, b) => (a.name.toLowerCase() === q ? -1 : 0) - (b.name.toLowerCase() === q ? -1 : 0) || a.name.localeCompare(b.name));
    out.hidden = false;
    put(out,
      h('p', { class: 'muted', role: 'status', text: found.length ? `${found.length} found${found.length > 20 ? ', the first 20:' : ':'}` : 'No server or resource has that in its name.' }),
      h('ul', {}, found.slice(0, 20).map((t) => h('li', {}, t.kind === 'server' ? h('a', { href: serverHref(t.name) }, t.name) : h('span', { text: `${t.name} (${t.kind})` }), ' ', statusBadge(t.status, t.troubled)))));
  }
  $('#map-search').addEventListener('input', searchMap);
  $('#map-search-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const first = $('#map-found a');
    if (first) location.hash = first.getAttribute('href');
  });

  // ---- a server's page ----

  const srv = { since: '1h' };

  async function loadServer(nav, name) {
    const view = $('#server-view');
    $('h1', view).textContent = name;
    const draw = async (first) => {
      try {
        const [s, m] = await Promise.all([get(nav, `/api/servers/${encodeURIComponent(name)}`), loadMetrics(nav, name)]);
        if (!s) return;
        renderServer(s, m);
        ready('server');
      } catch (e) {
        fail('server-view', name, e);
        if (first) put($('#server-body'));
      }
    };
    page.fleetRefresh = () => draw(false);
    every(nav, () => draw(false));
    await draw(true);
  }

  async function loadMetrics(nav, name) {
    try {
      return await get(nav, `/api/servers/${encodeURIComponent(name)}/metrics?since=${srv.since}`);
    } catch (e) {
      return { error: e.message };
    }
  }

  function renderServer(a, m) {
    const s = a.server;
    const head = h('div', { class: 'server-head' }, statusBadge(s.status, s.status !== 'online'),
      s.district ? h('span', { class: 'muted', text: `district ${s.district}` }) : null,
      s.lastSeen ? h('span', { class: 'muted', text: `last seen ${when(s.lastSeen)}` }) : null);
    const rel = [];
    if (a.incident) rel.push(h('p', { class: 'rel bad' }, h('span', { 'aria-hidden': 'true', text: '◎ ' }), `Root cause of an open incident: ${a.incident.reason} — explains ${a.incident.explainsCount}, ${a.incident.atRiskCount} at risk. `, h('a', { href: '#incidents', text: 'Incidents' })));
    if (a.explainedBy) rel.push(h('p', { class: 'rel bad' }, h('span', { 'aria-hidden': 'true', text: '↳ ' }), 'Explained by ', link(a.explainedBy, false), ', the root cause of its trouble. ', h('a', { href: '#incidents', text: 'Incidents' })));
    for (const r of a.atRiskFrom || []) rel.push(h('p', { class: 'rel warn' }, h('span', { 'aria-hidden': 'true', text: '⚠ ' }), 'At risk from ', link(r, false), ', which it depends on. ', h('a', { href: '#incidents', text: 'Incidents' })));

    const trend = new Map(((m && m.disks) || []).map((d) => [d.mount, d]));
    const cpu = s.cpu;
    const facts = section('Facts', dl([
      ['OS', s.os ? `${s.os.name} ${s.os.version} (${s.os.arch}), kernel ${s.os.kernel}` : ''],
      ['Host name', s.os && s.os.hostname],
      ['CPU', cpu ? `${cpu.cores} cores, ${pct(cpu.busyPercent)} busy, load ${cpu.load1} / ${cpu.load5} / ${cpu.load15}` : ''],
      ['Memory', s.memory ? `${pct(s.memory.usedPercent)} of ${bytes(s.memory.totalBytes)} used, ${bytes(s.memory.availableBytes)} available; swap ${bytes(s.memory.swapUsedBytes)} of ${bytes(s.memory.swapTotalBytes)}` : ''],
      ['Up for', s.uptimeSeconds !== undefined ? span(s.uptimeSeconds) : ''],
      ['Addresses', (s.addresses || []).join(', ')],
      ['Updates', s.updates ? `${s.updates.pending} pending, ${s.updates.security} security (${s.updates.manager || 'package manager'}, checked ${when(s.updates.checkedAt)})` : ''],
      ['Agent', s.agentVersion],
      ['Commands', s.commands && s.commands.enabled ? `run as ${s.commands.runAs || 'the agent\'s user'}` : 'off on this server'],
    ]));
    const disks = section('Disks', table('Disks, with when each fills at the trend of the chart\'s window', ['Mount', 'Used', 'Size', 'Inodes', 'Full'],
      (s.disks || []).map((d) => {
        const t = trend.get(d.mount);
        const full = !t ? '' : t.fullIn ? `in ${t.fullIn} (${when(t.fullAt)})` : t.notFilling ? 'not filling' : (t.note || '');
        return [h('span', {}, d.mount, h('span', { class: 'muted', text: ` ${d.device} ${d.filesystem}` })), meter(d.usedPercent), bytes(d.totalBytes), pct(d.inodesUsedPercent), full];
      })) || empty(s.disks ? 'No disks.' : 'Unknown (see gaps).'));
    const ports = section('Listening', table('Listening ports and their processes', ['Proto', 'Address', 'Port', 'Process'],
      (s.listening || []).map((l) => [l.proto, l.address, String(l.port), l.process || '?'])) || empty(s.listening ? 'Nothing listens.' : 'Unknown (see gaps).'));
    const containers = section('Containers', table('Containers', ['Name', 'Image', 'State', 'Status'],
      (s.containers || []).map((c) => [c.name, c.image, c.state, c.status])) || empty(s.containers ? 'None.' : 'Unknown (see gaps).'));
    const units = section('Failed units', table('Failed systemd units', ['Unit', 'Description', 'Since'],
      (s.failedUnits || []).map((u) => [u.name, u.description, when(u.since)])) || empty(s.failedUnits ? 'None failed.' : 'Unknown (see gaps).'));
    const tp = s.topProcesses;
    const procRows = (ps) => ps.map((p) => [String(p.pid), p.name, p.user || '', p.unit || '', `${p.cpuPercent}%`, bytes(p.rssBytes)]);
    const procs = section('Top processes', tp ? [table('Busiest processes', ['PID', 'Name', 'User', 'Unit', 'CPU', 'Memory'], procRows(tp.byCpu || [])),
      table('Largest processes', ['PID', 'Name', 'User', 'Unit', 'CPU', 'Memory'], procRows(tp.byMemory || []))] : empty('Unknown (see gaps).'));
    const gaps = section('Gaps', (s.gaps || []).length
      ? h('ul', { class: 'gaps' }, s.gaps.map((g) => h('li', {}, h('b', { text: g.check }), `: ${g.reason}`)))
      : empty('Every fact was collected.'));
    const isServer = (id) => !(map.data && map.data.targets.some((t) => t.id === id && t.kind !== 'server'));
    const topo = section('Uses and used by', dl([
      ['Uses', list(a.uses, isServer)],
      ['Used by', list(a.usedBy, isServer)],
      ['Blast radius', `${a.blastRadiusCount} target${a.blastRadiusCount === 1 ? '' : 's'} depend on it`],
    ]));
    const recent = section('Incidents', (a.recentIncidents || []).length ? table('Incidents that involved it', ['Target', 'Reason', 'Started', 'Ended'],
      a.recentIncidents.map((i) => [i.target, i.reason, when(i.startedAt), i.endedAt ? when(i.endedAt) : 'open'])) : empty('None recorded.'));
    const sec = section('Security', securityBody(a.security, true));
    const cmds = section('Commands', a.commands.length ? h('ul', { class: 'cmds' }, a.commands.map(commandItem)) : empty('No command was asked for on it.'),
      a.commandsNote ? empty(a.commandsNote) : null,
      h('p', {}, h('a', { href: `#audit?server=${encodeURIComponent(s.name)}`, text: `Its audit` })));
    put($('#server-body'), head, ...rel, charts(m), facts, disks, ports, containers, units, procs, gaps, topo, recent, sec, cmds);
  }

  function meter(p) {
    const cls = p >= 90 ? 'bad' : p >= 80 ? 'warn' : 'ok';
    const bar = h('span', { class: `meter ${cls}`, 'aria-hidden': 'true' }, h('span', { class: 'fill' }));
    bar.firstChild.style.width = `${Math.min(100, Math.max(0, p))}%`; // CSSOM, allowed by the CSP
    return h('span', { class: 'meterbox' }, bar, ` ${pct(p)}${p >= 90 ? ' ⚠' : ''}`);
  }

  function commandItem(c) {
    return h('li', { class: 'cmd-item' },
      h('div', { class: 'card-head' }, h('span', { class: `badge status ${c.status}`, text: c.status.replace('_', ' ') }), h('span', { class: 'muted when', text: when(c.createdAt) })),
      h('pre', { class: 'cmd', text: c.command }),
      h('p', { class: 'reason', text: c.reason }),
      h('p', { class: 'muted', text: [`asked by ${c.client || '?'}`, c.decidedBy && `decided by ${c.decidedBy}`, c.exitCode !== undefined && c.exitCode !== null && `exit ${c.exitCode}`].filter(Boolean).join(', ') }));
  }

  // ---- charts ----

  const SINCE = [['1h', 'Last hour'], ['1d', 'Last day'], ['7d', 'Last week']];
  function charts(m) {
    const nav = page.nav;
    const buttons = h('div', { class: 'seg', role: 'group', 'aria-label': 'Time range of the charts' }, SINCE.map(([v, label]) => h('button', {
      type: 'button', 'aria-pressed': String(v === srv.since), 'data-since': v, text: label,
      onclick: async () => {
        srv.since = v;
        const name = $('#server-view h1').textContent;
        const nm = await loadMetrics(nav, name);
        if (page.nav !== nav || !nm) return;
        $('#server-body .charts').replaceWith(charts(nm));
        ready('server');
      },
    })));
    const box = h('section', { class: 'panel charts' }, h('h2', { text: 'History' }), buttons);
    if (!m || m.error) {
      box.append(h('p', { class: 'error', role: 'alert', text: `The metrics could not be read: ${m ? m.error : 'no answer'}` }));
      return box;
    }
    if (m.note) box.append(empty(m.note));
    const grid = h('div', { class: 'chart-grid' });
    for (const s of m.series || []) grid.append(chart(s, m));
    box.append(grid);
    return box;
  }

  function stepMs(step) {
    let ms = 0;
    for (const [, n, u] of (step || '').matchAll(/(\d+)([smhd])/g)) ms += Number(n) * { s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[u];
    return ms || 6e4;
  }

  function chart(s, m) {
    const title = s.metric === 'cpu' ? 'CPU' : s.metric === 'memory' ? 'Memory' : s.metric === 'load' ? 'Load' : `Disk ${s.metric.slice(5)}`;
    const percent = s.unit === 'percent';
    const fmt = (v) => (percent ? pct(v) : (Math.round(v * 100) / 100).toString());
    const from = Date.parse(m.from);
    const to = Date.parse(m.to);
    const top = percent ? 100 : Math.max(1, Math.ceil(s.max * 1.2));
    const W = 300;
    const H = 100;
    const x = (t) => ((t - from) / Math.max(1, to - from)) * W;
    const y = (v) => H - (Math.min(top, Math.max(0, v)) / top) * H;
    const gap = stepMs(m.step) * 1.5;
    const runs = [];
    let run = [];
    let last = 0;
    for (const [t, lo, avg, hi] of s.points) {
      const ms = Date.parse(t);
      if (run.length && ms - last > gap) { runs.push(run); run = []; }
      run.push([x(ms), y(lo), y(avg), y(hi)]);
      last = ms;
    }
    if (run.length) runs.push(run);
    const range = SINCE.find(([v]) => v === m.since);
    const summary = s.points.length
      ? `${title}, ${range ? range[1].toLowerCase() : m.since}: now ${fmt(s.now)}, min ${fmt(s.min)}, max ${fmt(s.max)}, average ${fmt(s.avg)}`
      : `${title}: no samples in this window`;
    const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': summary, class: 'chart' },
      h('svg:title', { text: summary }),
      [25, 50, 75].map((g) => h('svg:line', { x1: 0, x2: W, y1: H - g, y2: H - g, class: 'grid' })),
      runs.map((r) => [
        h('svg:polygon', { class: 'band', points: [...r.map((p) => `${p[0].toFixed(1)},${p[3].toFixed(1)}`), ...r.slice().reverse().map((p) => `${p[0].toFixed(1)},${p[1].toFixed(1)}`)].join(' ') }),
        r.length === 1 ? h('svg:circle', { cx: r[0][0].toFixed(1), cy: r[0][2].toFixed(1), r: 2, class: 'dot' })
          : h('svg:polyline', { class: 'avg', points: r.map((p) => `${p[0].toFixed(1)},${p[2].toFixed(1)}`).join(' ') }),
      ]));
    return h('figure', { class: 'chart-box', 'data-metric': s.metric },
      h('figcaption', {}, h('b', { text: title }), h('span', { class: 'muted', text: s.points.length ? ` now ${fmt(s.now)} · max ${fmt(s.max)}${s.trendPerHour ? ` · ${s.trendPerHour > 0 ? '↗' : '↘'} ${Math.abs(Math.round(s.trendPerHour * 100) / 100)}${percent ? ' pts' : ''}/h` : ''}` : ' no samples' })),
      h('div', { class: 'plot' }, h('span', { class: 'ymax muted', text: fmt(top) }), svg),
      h('div', { class: 'axis muted' }, h('span', { text: new Date(from).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }) }), h('span', { text: 'now' })));
  }

  // ---- incidents ----

  async function loadIncidents(nav) {
    try {
      const inc = await get(nav, '/api/incidents');
      if (!inc) return;
      const o = inc.open;
      put($('#incidents-open'),
        h('p', { class: 'muted', text: `${o.rootCausesCount} open, ${o.troubledCount} troubled, ${o.healthy} of ${o.total} healthy` }),
        ...(o.rootCauses.length ? o.rootCauses.map((rc) => incidentBox({ target: rc.id, name: rc.name, kind: rc.kind, status: rc.status, reason: rc.reason, since: rc.since,
          explains: rc.explains, explainsCount: rc.explainsCount, atRisk: rc.atRisk, atRiskCount: rc.atRiskCount })) : [empty('No incident is open.')]),
        o.nextAfter ? empty(`More root causes than shown: ${o.rootCausesCount}.`) : null,
        ...(inc.gaps || []).concat(o.gaps || []).map((g) => h('p', { class: 'notice-inline', text: `${g.check}: ${g.reason}` })));
      put($('#incidents-history'), table('Incidents, newest first', ['Target', 'Kind', 'Reason', 'Started', 'Ended', 'Lasted', 'Explained'],
        inc.history.map((i) => [i.target, i.kind, i.reason, when(i.startedAt), i.endedAt ? when(i.endedAt) : h('span', { class: 'st bad' }, h('span', { 'aria-hidden': 'true', text: '● ' }), 'open'),
          span(i.durationSeconds), i.explainsCount ? `${i.explainsCount}: ${i.explains.join(', ')}${i.explainsCount > i.explains.length ? ' …' : ''}` : 'nothing else']))
        || empty('No incident was recorded.'));
      ready('incidents');
    } catch (e) { fail('incidents-view', 'the incidents', e); }
  }

  // ---- security ----

  function attackItem(a) {
    return h('li', { class: 'finding' },
      h('div', { class: 'card-head' }, h('span', { class: `st ${a.state === 'open' ? 'bad' : 'ok'}` }, h('span', { 'aria-hidden': 'true', text: a.state === 'open' ? '● ' : '○ ' }), a.state),
        h('b', { text: a.kind.replaceAll('_', ' ') }), h('span', { text: 'on' }), link(a.server), h('span', { text: `from ${a.source}` })),
      dl([
        ['Attempts', `${a.count} (${a.invalidUsers} for users that do not exist)`],
        ['Users tried', `${(a.users || []).join(', ')}${a.usersMore ? ` and ${a.usersMore} more` : ''}`],
        ['Logged in', a.successes ? `${a.successes} times, last as ${a.loggedInAs}` : ''],
        ['Seen', `${when(a.firstSeen)} to ${when(a.lastSeen)}`],
        ['Blocked', a.blocked ? `yes, by ${a.blockedBy}` : 'no'],
        ['Advice', a.advice],
        ['Runbook', a.runbook],
      ]));
  }
  function exposureItem(x) {
    return h('li', { class: 'finding' },
      h('div', { class: 'card-head' }, h('span', { class: `st ${x.severity === 'high' ? 'bad' : x.severity === 'medium' ? 'warn' : 'ok'}` }, h('span', { 'aria-hidden': 'true', text: '▲ ' }), x.severity),
        h('b', { text: x.kind.replaceAll('_', ' ') }), x.server ? link(x.server) : h('span', { text: x.resource || '' })),
      h('p', { text: x.detail }), dl([['Advice', x.advice], ['Runbook', x.runbook]]));
  }
  function securityBody(s, one) {
    if (!s) return empty('Unknown.');
    return [
      h('p', { class: 'muted', text: `${s.attacksOpen} open of ${s.attacksCount} attacks · ${s.exposuresCount} exposures · ${s.gapsCount} gaps${one ? '' : ` · ${s.sourcesCount} attacking addresses`}` }),
      h('h3', { text: 'Attacks' }), s.attacks.length ? h('ul', { class: 'findings attacks' }, s.attacks.map(attackItem)) : empty('None.'),
      one || !s.sources.length ? null : [h('h3', { text: 'Sources' }), table('Attacking addresses', ['Address', 'Servers', 'Open', 'Unblocked', 'Attempts', 'Last seen'],
        s.sources.map((x) => [x.source, String(x.servers), String(x.open), String(x.unblocked), String(x.count), when(x.lastSeen)]))],
      h('h3', { text: 'Exposures' }), s.exposures.length ? h('ul', { class: 'findings' }, s.exposures.map(exposureItem)) : empty('None.'),
      h('h3', { text: 'Gaps' }), s.gaps.length ? h('ul', { class: 'gaps' }, s.gaps.map((g) => h('li', {}, h('b', { text: `${g.server} ${g.check}` }), `: ${g.reason}`))) : empty('Every check ran.'),
    ];
  }

  async function loadSecurity(nav) {
    try {
      const s = await get(nav, '/api/security');
      if (!s) return;
      const body = h('div', {}, securityBody(s, false));
      put($('#security-body'), body);
      let after = s.nextAfter;
      if (after) {
        const more = h('button', { type: 'button', class: 'more', text: 'More attacks', onclick: async () => {
          more.disabled = true;
          try {
            const p = await get(nav, `/api/security?after=${encodeURIComponent(after)}`);
            if (!p) return;
            $('.attacks', body).append(...p.attacks.map(attackItem));
            after = p.nextAfter;
            more.hidden = !after;
          } catch (e) { fail('security-view', 'more attacks', e); } finally { more.disabled = false; }
        } });
        $('.attacks', body).after(more);
      }
      ready('security');
    } catch (e) { fail('security-view', 'the security findings', e); }
  }

  // ---- audit ----

  const FILTERS = ['server', 'client', 'token', 'approver', 'outcome', 'q'];
  const form = $('#audit-form');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of FILTERS) if (form[k].value.trim()) p.set(k, form[k].value.trim());
    const next = `#audit${p.size ? `?${p}` : ''}`;
    if (location.hash === next) route(next); else location.hash = next;
  });
  $('#audit-clear').addEventListener('click', () => { form.reset(); location.hash = '#audit'; });

  async function loadAudit(nav, params) {
    for (const k of FILTERS) form[k].value = params.get(k) || '';
    const list = $('#audit-list');
    const more = $('#audit-more');
    const page1 = async (after) => {
      const p = new URLSearchParams(params);
      if (after) p.set('after', after);
      const r = await get(nav, `/api/audit?${p}`);
      if (!r) return null;
      list.append(...r.requests.map(auditItem));
      more.hidden = !r.nextAfter;
      more.onclick = async () => {
        more.disabled = true;
        try { await page1(r.nextAfter); } catch (e) { fail('audit-view', 'more of the audit', e); } finally { more.disabled = false; }
      };
      return r;
    };
    put(list);
    more.hidden = true;
    try {
      const r = await page1('');
      if (!r) return;
      $('#audit-summary').textContent = `${r.matched} request${r.matched === 1 ? '' : 's'} match, of the newest ${r.scanned}.`;
      ready('audit');
    } catch (e) {
      $('#audit-summary').textContent = '';
      fail('audit-view', 'the audit', e);
    }
  }

  function auditItem(r) {
    return h('article', { class: 'card hist audit', 'data-id': r.id },
      h('header', { class: 'card-head' }, link(r.server), h('span', { class: `badge status ${r.status}`, text: r.status.replace('_', ' ') }),
        r.risky ? h('span', { class: 'badge risky', text: 'risky' }) : null, h('span', { class: 'when muted', text: when(r.createdAt) })),
      h('pre', { class: 'cmd', text: r.command }),
      h('p', { class: 'reason', text: r.reason }),
      dl([['Asked by', [r.client, r.token && `token ${r.token}`].filter(Boolean).join(', ')], ['Decision', r.decidedBy ? `${r.decision} by ${r.decidedBy}` : r.decision],
        ['Note', r.note], ['Exit code', r.exitCode === null || r.exitCode === undefined ? '' : String(r.exitCode)]]),
      h('details', { class: 'steps' }, h('summary', { text: `${r.steps.length} step${r.steps.length === 1 ? '' : 's'}` }),
        h('ol', {}, r.steps.map((s) => h('li', {}, h('span', { class: 'muted', text: `${when(s.at)} ` }), h('b', { text: s.step }), s.actor ? ` by ${s.actor}` : '',
          s.detail ? h('code', { class: 'detail', text: ` ${JSON.stringify(s.detail)}` }) : null)))));
  }

  // ---- the approval card's context ----

  // cardContext shows, on a card, the health of the server the command
  // would run on and any incident that involves it, with a link to its page.
  async function cardContext(box, server) {
    let a;
    try {
      a = await api('GET', `/api/servers/${encodeURIComponent(server)}`);
    } catch (e) {
      // A coordinator without fleet pages (503) has nothing to add.
      box.hidden = e.status !== 404;
      if (e.status === 404) put(box, h('p', { class: 'muted', text: `${server} is not in the fleet model: ${e.message}` }));
      return;
    }
    const s = a.server;
    const disks = (s.disks || []).slice().sort((x, y) => y.usedPercent - x.usedPercent);
    const figs = [];
    if (s.status === 'online') {
      if (s.cpu && s.cpu.busyPercent !== undefined) figs.push(`cpu ${pct(s.cpu.busyPercent)}`);
      if (s.memory) figs.push(`mem ${pct(s.memory.usedPercent)}`);
      if (disks.length) figs.push(`disk ${disks[0].mount} ${pct(disks[0].usedPercent)}`);
    }
    const rel = [];
    if (a.incident) rel.push(h('li', { class: 'bad' }, '◎ root cause of an incident: ', a.incident.reason));
    if (a.explainedBy) rel.push(h('li', { class: 'bad' }, `↳ explained by ${a.explainedBy}`));
    for (const r of a.atRiskFrom || []) rel.push(h('li', { class: 'warn' }, `⚠ at risk from ${r}`));
    const attacks = a.security && a.security.attacksOpen;
    if (attacks) rel.push(h('li', { class: 'bad' }, `● ${attacks} open attack${attacks === 1 ? '' : 's'}`));
    put(box,
      h('p', { class: 'ctx-health' }, statusBadge(s.status, s.status !== 'online'), figs.length ? h('span', { class: 'muted', text: ` · ${figs.join(' · ')}` }) : null),
      rel.length ? h('ul', { class: 'ctx-rel' }, rel) : null,
      h('a', { class: 'ctx-link', href: serverHref(server), text: `${server}: its page →` }));
    box.hidden = false;
  }

  // fleetChanged re-reads what the open page shows, once for a burst.
  let fleetTimer = 0;
  function fleetChanged() {
    clearTimeout(fleetTimer);
    fleetTimer = setTimeout(() => { if (page.fleetRefresh) page.fleetRefresh(); }, 300);
  }

  return { route, leave, cardContext, fleetChanged };
};
