// The approval app. Everything that came from the AI or the fleet (commands,
// reasons, prompts, output) is put on the page with textContent, never as
// HTML, so it cannot become markup or script.
'use strict';

(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const state = {
    me: null,
    token: null, // this tab's session key; see below
    cards: new Map(), // request id -> {req, el}
    skew: 0, // coordinator clock minus ours, in ms, for the countdowns
    stream: null, // the AbortController of the live event stream
    retries: 0,
    retryTimer: 0,
    historyTimer: 0,
    contextTimer: 0,
    listed: false, // the first list of pending requests has arrived
    focus: '', // the request a link (#requests/ID) asks to show
  };

  // ---- the session key ----
  //
  // The session cookie alone opens nothing: browsers send it to every port
  // of this host, so any local server could replay it. Every call also
  // sends X-Gridcity-Session with the key the login answered with. The key
  // is kept in sessionStorage, which belongs to this origin (scheme, host
  // and port) and this tab alone: it survives a reload, never leaves the
  // browser on its own, and is gone when the tab closes. Never in a cookie,
  // never in localStorage.

  const TOKEN_KEY = 'gridcity.session';
  const HEADER = 'X-Gridcity-Session';

  function loadToken() {
    try { state.token = sessionStorage.getItem(TOKEN_KEY); } catch { state.token = null; }
    return state.token;
  }

  function saveToken(token) {
    state.token = token;
    try { sessionStorage.setItem(TOKEN_KEY, token); } catch { /* kept in memory for this page */ }
  }

  function clearToken() {
    state.token = null;
    try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* nothing kept */ }
  }

  // Other tabs of the app (this origin only: a BroadcastChannel never
  // crosses origins, so never ports) hand their key to a new tab, so that
  // opening the app's link again does not ask for the password again, and
  // a login or logout in one tab is followed by the others.
  const channel = 'BroadcastChannel' in window ? new BroadcastChannel('gridcity-session') : null;
  let awaitingToken = null; // set while askOtherTabs waits for an answer
  function tell(msg) { if (channel) channel.postMessage(msg); }
  if (channel) {
    channel.onmessage = (e) => {
      const m = e.data || {};
      if (m.type === 'ask' && state.me && state.token) {
        tell({ type: 'token', token: state.token });
      } else if (m.type === 'token' && typeof m.token === 'string') {
        if (awaitingToken) awaitingToken(m.token);
        else if (m.token !== state.token) adopt(m.token);
      } else if (m.type === 'logout' && state.token) {
        loggedOut('You logged out in another tab.');
      }
    };
  }

  // askOtherTabs resolves to a key from another open tab, or null.
  function askOtherTabs() {
    if (!channel) return Promise.resolve(null);
    return new Promise((resolve) => {
      const done = (token) => {
        clearTimeout(timer);
        awaitingToken = null;
        resolve(token);
      };
      const timer = setTimeout(() => done(null), 300);
      awaitingToken = done;
      tell({ type: 'ask' });
    });
  }

  // adopt switches this tab to a key another tab logged in with. The old
  // stream goes first, so that its end (the other tab's login ended this
  // tab's session) cannot undo the switch.
  async function adopt(token) {
    disconnect();
    saveToken(token);
    try {
      start(await api('GET', '/api/me'));
    } catch (err) {
      // A 401 already shows the login; the key is kept for a reload.
      if (err.status !== 401) showLogin(`Could not reach the coordinator: ${err.message}`);
    }
  }

  // api calls the app's JSON API; errors carry the server's message.
  async function api(method, path, body) {
    const opts = { method, headers: {}, credentials: 'same-origin', cache: 'no-store' };
    const token = state.token;
    if (path !== '/api/login' && token) opts.headers[HEADER] = token;
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    let data = null;
    if (res.status !== 204) {
      try { data = await res.json(); } catch { data = null; }
    }
    if (!res.ok) {
      const err = new Error((data && data.error) || `${res.status} ${res.statusText}`);
      err.status = res.status;
      // A 401 for a key this tab has since replaced is no news.
      if (res.status === 401 && path !== '/api/login' && token === state.token) loggedOut('Your session ended; log in again.');
      throw err;
    }
    return data;
  }

  // ---- views ----

  // The fleet's pages (pages.js) share this page's session.
  const pages = window.gridcityPages({ api });

  function showOnly(id) {
    for (const v of document.querySelectorAll('main > section')) v.hidden = v.id !== id;
    for (const a of document.querySelectorAll('.bar nav a')) {
      const on = a.id === 'nav-pending' ? id === 'pending-view' : a.id === 'nav-history' ? id === 'history-view' : a.dataset.view === id;
      a.classList.toggle('active', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
  }

  // loggedOut forgets the key, which the coordinator no longer accepts.
  function loggedOut(message) {
    clearToken();
    showLogin(message);
  }

  function showLogin(message) {
    state.me = null;
    pages.leave();
    disconnect();
    $('#bar').hidden = true;
    notice('');
    showOnly('login-view');
    $('#login-error').textContent = message || '';
    $('#login-form [name=username]').focus();
  }

  function route() {
    if (!state.me) return;
    pages.leave();
    // An AI client's sign-in (the authorization endpoint sent us here).
    const ask = location.hash.match(/^#oauth\/([A-Za-z0-9_-]+)$/);
    if (ask) {
      showOnly('oauth-view');
      showConsent(ask[1]);
      return;
    }
    // A notification's link: the card of one request.
    const card = location.hash.match(/^#requests\/([^/?]+)$/);
    if (card) {
      showOnly('pending-view');
      state.focus = decodeURIComponent(card[1]);
      focusCard(state.listed);
      return;
    }
    if (location.hash === '#clients') {
      showOnly('clients-view');
      loadClients();
      return;
    }
    if (location.hash === '#history') {
      showOnly('history-view');
      loadHistory();
      return;
    }
    // A server's page is named by the hash: it starts at the top.
    const view = pages.route(location.hash);
    showOnly(view || 'pending-view');
    if (view) window.scrollTo(0, 0);
  }

  // showConsent shows who asks to sign in, and sends the browser back to
  // the client with the approver's answer.
  async function showConsent(id) {
    $('#oauth-ask').hidden = true;
    $('#oauth-error').textContent = '';
    const path = `/api/oauth/requests/${encodeURIComponent(id)}`;
    let req;
    try {
      req = await api('GET', path);
    } catch (err) {
      $('#oauth-error').textContent = err.message;
      return;
    }
    $('#oauth-name').textContent = req.clientName;
    $('#oauth-client').textContent = req.clientId;
    $('#oauth-host').textContent = req.redirectHost;
    $('#oauth-scope').textContent = req.scope === 'operate' ? 'read, and ask to run commands' : 'read only';
    const operate = $('#oauth-scopes input[value=operate]');
    operate.disabled = req.scope !== 'operate';
    $('#oauth-scopes input[value=read]').checked = true;
    $('#oauth-ask').hidden = false;
    const answer = async (how, body) => {
      $('#oauth-grant').disabled = $('#oauth-deny').disabled = true;
      try {
        const res = await api('POST', `${path}/${how}`, body);
        location.assign(res.redirect);
      } catch (err) {
        $('#oauth-error').textContent = err.message;
        $('#oauth-grant').disabled = $('#oauth-deny').disabled = false;
      }
    };
    $('#oauth-grant').onclick = () => answer('grant', { scope: $('#oauth-scopes input:checked').value });
    $('#oauth-deny').onclick = () => answer('deny', {});
  }

  // loadClients lists the AI clients signed in with OAuth, each with a
  // button that removes it (its tokens are revoked; it must sign in again).
  async function loadClients() {
    const list = $('#clients-list');
    $('#clients-error').textContent = '';
    let clients;
    try {
      clients = await api('GET', '/api/oauth/clients');
    } catch (err) {
      $('#clients-error').textContent = err.message;
      return;
    }
    list.replaceChildren();
    $('#clients-empty').hidden = clients.length > 0;
    for (const c of clients) {
      const card = document.createElement('article');
      card.className = 'card';
      const head = document.createElement('header');
      head.className = 'card-head';
      const name = document.createElement('span');
      name.className = 'server';
      name.textContent = c.name;
      head.append(name);
      const meta = document.createElement('dl');
      meta.className = 'meta';
      for (const [k, v] of [['Client', c.clientId], ['Scope', c.scope], ['Granted by', c.approvers.join(', ') || '—'], ['Since', new Date(c.createdAt).toLocaleString()]]) {
        const r = document.createElement('div');
        r.className = 'row';
        const dt = document.createElement('dt');
        dt.textContent = k;
        const dd = document.createElement('dd');
        dd.textContent = v;
        r.append(dt, dd);
        meta.append(r);
      }
      const actions = document.createElement('div');
      actions.className = 'actions';
      const revoke = document.createElement('button');
      revoke.type = 'button';
      revoke.className = 'danger';
      revoke.textContent = 'Revoke';
      revoke.addEventListener('click', async () => {
        revoke.disabled = true;
        try {
          await api('POST', '/api/oauth/clients/revoke', { clientId: c.clientId });
          flash(`${c.name} is signed out; it must sign in again.`);
          loadClients();
        } catch (err) {
          $('#clients-error').textContent = err.message;
          revoke.disabled = false;
        }
      });
      actions.append(revoke);
      card.append(head, meta, actions);
      list.append(card);
    }
  }

  // focusCard brings the card a link named into view. Once the pending list
  // is in (last) and the card is not on it, the request was decided
  // already: its outcome is in the history.
  function focusCard(last) {
    const id = state.focus;
    if (!id) return;
    const c = state.cards.get(id);
    if (c) {
      state.focus = '';
      c.el.classList.add('focused');
      c.el.scrollIntoView({ block: 'center' });
      c.el.tabIndex = -1; // for a keyboard or a screen reader, the card is where the page starts
      c.el.focus({ preventScroll: true });
      return;
    }
    if (last) {
      state.focus = '';
      flash('That request is no longer waiting; its outcome is in the history.');
      location.hash = '#history';
    }
  }

  function notice(text) {
    $('#notice').textContent = text;
    $('#notice').hidden = !text;
  }

  let flashTimer = 0;
  function flash(text) {
    $('#flash').textContent = text;
    $('#flash').hidden = false;
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => { $('#flash').hidden = true; }, 6000);
  }

  // ---- login ----

  $('#login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const form = e.target;
    const button = $('button', form);
    button.disabled = true;
    $('#login-error').textContent = '';
    try {
      const me = await api('POST', '/api/login', {
        username: form.username.value,
        password: form.password.value,
      });
      form.password.value = '';
      saveToken(me.csrfToken);
      tell({ type: 'token', token: me.csrfToken });
      start({ username: me.username, expiresAt: me.expiresAt });
    } catch (err) {
      $('#login-error').textContent = err.message;
    } finally {
      button.disabled = false;
    }
  });

  $('#logout').addEventListener('click', async () => {
    try { await api('POST', '/api/logout'); } catch { /* the session is gone either way */ }
    tell({ type: 'logout' });
    loggedOut('You are logged out.');
  });

  function start(me) {
    state.me = me;
    $('#who').textContent = me.username;
    $('#bar').hidden = false;
    connect();
    route();
  }

  // ---- live list ----
  //
  // The coordinator serves server-sent events, but EventSource cannot send
  // the session key, so the stream is read with fetch: lines of
  // "event: NAME" and "data: JSON", an empty line ending each event, and
  // ": ping" comments every 15 s.

  const handlers = {
    pending(snap) {
      state.skew = Date.parse(snap.now) - Date.now();
      state.retries = 0;
      notice('');
      const ids = new Set(snap.requests.map((r) => r.id));
      for (const id of state.cards.keys()) if (!ids.has(id)) removeCard(id);
      for (const r of snap.requests) addCard(r);
      state.listed = true;
      focusCard(true);
    },
    created(r) { addCard(r); },
    // What the map draws may have changed: the open page and the cards'
    // context are read again.
    fleet() {
      pages.fleetChanged();
      clearTimeout(state.contextTimer);
      state.contextTimer = setTimeout(() => {
        for (const { req, el } of state.cards.values()) pages.cardContext($('.context', el), req.server);
      }, 300);
    },
    end({ reason }) { loggedOut(reason); },
  };
  for (const kind of ['decided', 'updated', 'finished']) {
    handlers[kind] = (r) => {
      if (r.status !== 'pending' && state.cards.has(r.id)) {
        removeCard(r.id);
        if (r.decidedBy && r.decidedBy !== state.me.username) {
          flash(`${r.server}: ${r.decision} by ${r.decidedBy}`);
        } else if (r.decision === 'expired') {
          flash(`${r.server}: expired unanswered`);
        }
      }
      if (!$('#history-view').hidden) reloadHistorySoon();
    };
  }

  // A stream that carried nothing, not even a heartbeat, for this long is
  // dead (a phone that slept, a proxy that dropped it): start over.
  const STALL_MS = 45000;

  function connect() {
    disconnect();
    const ctrl = new AbortController();
    state.stream = ctrl;
    readStream(ctrl).then(() => {
      // However the stream ended, unless the page ended it on purpose, the
      // page tries again with a growing delay.
      if (state.stream !== ctrl) return;
      disconnect();
      reconnectLater();
    });
  }

  // readStream reads the event stream until it ends or fails.
  async function readStream(ctrl) {
    const token = state.token;
    let stall = 0;
    const alive = () => {
      clearTimeout(stall);
      stall = setTimeout(() => ctrl.abort(), STALL_MS);
    };
    try {
      alive();
      const res = await fetch('/api/events', {
        headers: { [HEADER]: token || '', Accept: 'text/event-stream' },
        credentials: 'same-origin',
        cache: 'no-store',
        signal: ctrl.signal,
      });
      if (state.stream !== ctrl) return;
      if (res.status === 401) {
        let msg = 'Your session ended; log in again.';
        try { msg = (await res.json()).error || msg; } catch { /* keep the default */ }
        if (state.stream === ctrl && token === state.token) {
          state.stream = null;
          loggedOut(msg);
        }
        return;
      }
      if (!res.ok || !res.body || !(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let name = '';
      let data = [];
      for (;;) {
        const { value, done } = await reader.read();
        if (done || state.stream !== ctrl) return;
        alive();
        buf += value;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (data.length) dispatch(ctrl, name || 'message', data.join('\n'));
            name = '';
            data = [];
            continue;
          }
          if (line.startsWith(':')) continue; // a heartbeat
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let v = colon < 0 ? '' : line.slice(colon + 1);
          if (v.startsWith(' ')) v = v.slice(1);
          if (field === 'event') name = v;
          else if (field === 'data') data.push(v);
          // "retry" and "id" are for EventSource; the page has its own backoff.
        }
      }
    } catch {
      // Aborted, or the network failed: the caller decides what next.
    } finally {
      clearTimeout(stall);
    }
  }

  function dispatch(ctrl, name, data) {
    const h = handlers[name];
    if (!h || state.stream !== ctrl) return;
    let v;
    try { v = JSON.parse(data); } catch { return; }
    h(v);
  }

  function reconnectLater() {
    const delay = Math.min(30, 2 ** state.retries);
    state.retries++;
    notice(`Live updates lost. Reconnecting in ${delay} s…`);
    state.retryTimer = setTimeout(async () => {
      try {
        await api('GET', '/api/me');
        connect();
      } catch (err) {
        if (err.status !== 401) reconnectLater(); // a 401 already shows the login
      }
    }, delay * 1000);
  }

  function disconnect() {
    clearTimeout(state.retryTimer);
    const ctrl = state.stream;
    state.stream = null;
    if (ctrl) ctrl.abort();
  }

  // ---- text from the AI ----
  //
  // The coordinator refuses every character a person cannot see for what it
  // is (internal/command/visible.go). What is left may still look like
  // something it is not (a Cyrillic 'а' is drawn as a Latin 'a'), and a
  // right-to-left letter would reorder the ASCII around it ('>' drawn as
  // '<'). So every non-ASCII character, with the combining marks that
  // follow it, is drawn in a highlighted box of its own, whose tooltip names
  // its code points: a box is an inline-block, so the text around it stays
  // in the order it runs, and marks cannot draw outside it. ASCII is drawn
  // as itself. showText answers the code points it marked.
  const MARK = /^\p{M}$/u;
  function codePoint(c) { return 'U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0'); }
  function showText(el, text) {
    const parts = [];
    const marked = [];
    const chars = Array.from(text || '');
    let plain = '';
    for (let i = 0; i < chars.length;) {
      if (chars[i].codePointAt(0) < 0x80) {
        plain += chars[i++];
        continue;
      }
      if (plain) parts.push(plain);
      plain = '';
      let cluster = chars[i++];
      while (i < chars.length && MARK.test(chars[i])) cluster += chars[i++];
      const codes = Array.from(cluster, codePoint);
      const box = document.createElement('span');
      box.className = 'unusual';
      box.textContent = cluster;
      box.title = codes.join(' ');
      parts.push(box);
      marked.push(...codes);
    }
    if (plain) parts.push(plain);
    el.replaceChildren(...parts);
    return marked;
  }

  // showTexts fills each selector's element with its text, and the card's
  // .unusual-note with the code points that were marked, for phones, where
  // there is no tooltip.
  function showTexts(el, texts) {
    const marked = new Set();
    for (const [sel, text] of texts) for (const c of showText($(sel, el), text)) marked.add(c);
    const note = $('.unusual-note', el);
    note.textContent = marked.size ? `Not ASCII, highlighted above: ${[...marked].join(', ')}` : '';
    note.hidden = marked.size === 0;
  }

  function addCard(r) {
    if (state.cards.has(r.id) || r.status !== 'pending') return;
    const el = $('#card-tpl').content.firstElementChild.cloneNode(true);
    el.dataset.id = r.id;
    el.classList.toggle('risky', r.risky);
    $('.badge.risky', el).hidden = !r.risky;
    $('.server', el).textContent = r.server;
    const texts = [['.cmd', r.command], ['.reason', r.reason]];
    if (r.input) texts.push(['.input-label', r.input.prompt || 'Input for the command']);
    showTexts(el, texts);
    row(el, 'client', r.client);
    row(el, 'token', r.token);
    row(el, 'runas', r.runAs);
    row(el, 'runbook', r.runbook);
    if (r.input) {
      $('.input-field', el).hidden = false;
      $('.input', el).type = r.input.secret ? 'password' : 'text';
      $('.input', el).required = true;
    }
    $('.sudo-field', el).hidden = !r.sudo;
    $('.sudo-label', el).textContent = `sudo password for ${r.runAs || 'the run-as user'} (leave empty if sudo needs none)`;
    const form = $('.decide', el);
    form.addEventListener('submit', (e) => { e.preventDefault(); decide(r, el, 'approve'); });
    $('.deny', el).addEventListener('click', () => decide(r, el, 'deny'));
    state.cards.set(r.id, { req: r, el });
    pages.cardContext($('.context', el), r.server);
    // Oldest first: the one that expires soonest is on top.
    const after = [...state.cards.values()].find((c) => c.el.isConnected && c.req.createdAt > r.createdAt);
    $('#cards').insertBefore(el, after ? after.el : null);
    tick();
    counts();
    if (r.id === state.focus) focusCard(false);
  }

  function removeCard(id) {
    const c = state.cards.get(id);
    if (!c) return;
    state.cards.delete(id);
    c.el.classList.add('leaving');
    setTimeout(() => c.el.remove(), 300);
    counts();
  }

  function counts() {
    const n = state.cards.size;
    $('#count').textContent = n;
    $('#count').hidden = n === 0;
    $('#empty').hidden = n > 0;
    document.title = n ? `(${n}) gridcity approvals` : 'gridcity approvals';
  }

  async function decide(r, el, action) {
    const form = $('.decide', el);
    const err = $('.error', form);
    const body = { note: $('.note', el).value };
    if (action === 'approve') {
      if (r.input) {
        body.input = $('.input', el).value;
        if (!body.input) {
          err.textContent = 'Type the value the command asks for, or deny it.';
          $('.input', el).focus();
          return;
        }
      }
      if (r.sudo && $('.sudo', el).value) body.sudoPassword = $('.sudo', el).value;
    }
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    err.textContent = '';
    try {
      const done = await api('POST', `/api/requests/${encodeURIComponent(r.id)}/${action}`, body);
      removeCard(r.id);
      if (action === 'deny') flash(`Denied on ${done.server}.`);
      else if (done.status === 'failed') flash(`Approved, but it failed: ${done.detail}`);
      else flash(`Approved: ${done.status} on ${done.server}. The result will be in the history.`);
    } catch (e) {
      if (e.status === 409 || e.status === 404) {
        removeCard(r.id);
        flash(e.message);
        return;
      }
      err.textContent = e.message;
      if (e.status === 422) $('.input', el).focus();
    } finally {
      // Typed secrets do not linger in the page.
      $('.input', el).value = '';
      $('.sudo', el).value = '';
      for (const b of form.querySelectorAll('button')) b.disabled = false;
    }
  }

  // tick updates every card's time left, on the coordinator's clock.
  function tick() {
    const now = Date.now() + state.skew;
    for (const { req, el } of state.cards.values()) {
      const left = Math.round((Date.parse(req.expiresAt) - now) / 1000);
      const out = $('.left', el);
      out.textContent = left > 0 ? `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} left` : 'expiring…';
      out.classList.toggle('urgent', left < 60);
    }
  }
  setInterval(tick, 1000);

  // ---- history ----

  function reloadHistorySoon() {
    clearTimeout(state.historyTimer);
    state.historyTimer = setTimeout(loadHistory, 500);
  }

  async function loadHistory() {
    let list;
    try {
      list = await api('GET', '/api/history?limit=200');
    } catch (e) {
      if (e.status !== 401) flash(`Could not load the history: ${e.message}`);
      return;
    }
    const box = $('#history');
    box.replaceChildren(...list.map(historyItem));
    $('#history-empty').hidden = list.length > 0;
  }

  function historyItem(r) {
    const el = $('#hist-tpl').content.firstElementChild.cloneNode(true);
    el.dataset.id = r.id;
    $('.server', el).textContent = r.server;
    const badge = $('.badge.status', el);
    badge.textContent = r.status.replace('_', ' ');
    badge.classList.add(r.status);
    $('.when', el).textContent = new Date(r.createdAt).toLocaleString();
    showTexts(el, [['.cmd', r.command], ['.reason', r.reason]]);
    $('.badge.risky', el).hidden = !r.risky;
    row(el, 'asker', [r.client, r.token && `token ${r.token}`].filter(Boolean).join(', '));
    row(el, 'runbook', r.runbook);
    let decision = r.decision;
    if (r.decidedBy) decision += ` by ${r.decidedBy}`;
    if (r.decidedAt) decision += `, ${new Date(r.decidedAt).toLocaleString()}`;
    row(el, 'decision', decision);
    row(el, 'given', given(r));
    row(el, 'note', r.note);
    row(el, 'exit', r.exitCode === null ? '' : String(r.exitCode));
    row(el, 'duration', r.durationMs ? duration(r.durationMs) : '');
    row(el, 'detail', r.detail);
    output($('.stdout', el), 'stdout', r.stdout);
    output($('.stderr', el), 'stderr', r.stderr);
    return el;
  }

  // given says what the approver typed on the card, never its value, which
  // the coordinator does not keep.
  function given(r) {
    const what = [];
    if (r.inputGiven) what.push(r.input && r.input.secret ? 'the secret input' : 'the input');
    if (r.sudoPasswordGiven) what.push('a sudo password');
    return what.length ? `${what.join(' and ')} (not kept)` : '';
  }

  // output fills a collapsible stream; long ones start collapsed.
  function output(details, name, o) {
    if (!o || (!o.text && !o.omitted)) {
      details.hidden = true;
      return;
    }
    $('summary', details).textContent = o.omitted ? `${name} (${o.omitted} bytes left out in the middle)` : name;
    $('pre', details).textContent = o.text;
    details.open = o.text.length <= 600 && o.text.split('\n').length <= 12;
  }

  function duration(ms) {
    return ms < 1000 ? `${ms} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }

  // row shows a label/value pair of a card, or hides it when empty.
  function row(el, name, value) {
    const r = $(`.row.${name}`, el);
    $('dd', r).textContent = value || '';
    r.hidden = !value;
  }

  // ---- start ----

  window.addEventListener('hashchange', route);

  // The installable app: the service worker keeps the shell (never the
  // API's answers); a browser without one, or that refuses it, simply
  // runs the page as before.
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('/sw.js').catch(() => { /* the app works without it */ });
  }

  // After a reload the key is still in sessionStorage; in a new tab another
  // open tab may hand it over; otherwise the person logs in.
  (async () => {
    if (!loadToken()) {
      const token = await askOtherTabs();
      if (!token) {
        if (!state.me) showLogin('');
        return;
      }
      saveToken(token);
    }
    try {
      start(await api('GET', '/api/me'));
    } catch (err) {
      if (err.status !== 401) showLogin(`Could not reach the coordinator: ${err.message}`);
    }
  })();
})();
