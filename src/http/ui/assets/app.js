// tidegate operator console. Plain JS, no build step, no dependencies.
//
// The page reads and changes state only through tidegate's /v1 JSON API, with the session
// cookie and, for every change, the session's CSRF token in the X-CSRF-Token header. Nothing
// here is trusted for safety: the server checks role, token and expected version again.
'use strict';

(function () {
  const body = document.body;
  const PAGE = body.dataset.page;
  const CSRF = body.dataset.csrf || '';
  const CAN_CHANGE = body.dataset.role === 'operator';
  // `[freeze] by_default`: the loss-less boxes start ticked, and every move says which it is.
  const FREEZE_DEFAULT = body.dataset.freezeDefault === 'true';
  for (const id of ['dial-freeze', 'units-freeze']) {
    const box = document.getElementById(id);
    if (box) box.checked = FREEZE_DEFAULT;
  }
  const UNITS = Number(body.dataset.units) || 100;
  const STEP = 100 / UNITS;
  const WINDOW = body.dataset.window || '';
  const BLUE_ZONE = body.dataset.blueZone;
  const GREEN_ZONE = body.dataset.greenZone;
  const POLL_MS = 2000;
  // A read that takes longer than this is abandoned, so a hung or stopped tidegate shows as
  // "not updating" within seconds instead of leaving the page saying "Live".
  const READ_TIMEOUT_MS = 4000;
  // A change waits longer (the log fsyncs), but not for ever: past this its outcome is unknown.
  const WRITE_TIMEOUT_MS = 15000;
  const HISTORY_MS = 5 * 60 * 1000;
  // The routing domain the API uses when a request names none (GET /v1/routing's own `unit_map`).
  const DEFAULT_DOMAIN = 'default';
  const ACTIVE_DRAIN = ['running', 'paused', 'settling', 'rolling_back'];

  const $ = (id) => document.getElementById(id);

  // Builds an element; strings become text nodes, so API data can never become markup.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.className = v;
      else node.setAttribute(k, v === true ? '' : v);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A table that becomes one block per row on a phone (app.css, `table.stack`): each cell is
  // labelled with its column's heading, so nothing hides behind a sideways scroll.
  function stacked(table) {
    table.classList.add('stack');
    const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
    for (const row of table.querySelectorAll('tbody tr')) {
      [...row.children].forEach((cell, i) => { if (!cell.hasAttribute('data-label')) cell.setAttribute('data-label', heads[i] || ''); });
    }
    return table;
  }

  // ---- the API ---------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, detail, body) {
      super(detail);
      this.status = status;
      this.code = code;
      this.detail = detail;
      this.body = body || {};
    }
  }

  async function api(method, path, payload, timeoutMs) {
    const abort = new AbortController();
    const limit = timeoutMs || (method === 'GET' ? READ_TIMEOUT_MS : WRITE_TIMEOUT_MS);
    const timeout = setTimeout(() => abort.abort(), limit);
    try {
      return await call(method, path, payload, abort.signal, limit);
    } finally {
      clearTimeout(timeout);
    }
  }

  async function call(method, path, payload, signal, limit) {
    const options = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store', signal };
    if (method !== 'GET') {
      options.headers['Content-Type'] = 'application/json';
      options.headers['X-CSRF-Token'] = CSRF;
      options.body = JSON.stringify(payload || {});
    }
    let response;
    const timedOut = () => new ApiError(0, 'timeout', method === 'GET'
      ? 'tidegate did not answer within ' + limit / 1000 + ' s (it may be overloaded, stopped or unreachable).'
      : 'tidegate did not answer within ' + limit / 1000 + ' s, so whether the change was made is unknown: check the audit log before trying again.');
    try {
      response = await fetch(path, options);
    } catch (e) {
      if (signal.aborted) throw timedOut();
      throw new ApiError(0, 'network', 'tidegate did not answer. Check that it is running and that this machine can reach it.');
    }
    noteServerClock(response);
    let data = null;
    try { data = await response.json(); } catch (_) { if (signal.aborted) throw timedOut(); data = null; }
    if (!response.ok) {
      const code = (data && data.error) || 'http_' + response.status;
      const detail = (data && data.detail) || response.statusText || 'the request failed';
      if (response.status === 401) sessionEnded();
      throw new ApiError(response.status, code, detail, data);
    }
    return data;
  }

  // The server's clock minus ours, from each answer's Date header (whole seconds, so +500 ms
  // centres it). Ages such as "last heartbeat 3 s ago" compare server times with it, so a laptop
  // whose clock is off does not show a live consumer as long silent.
  let serverSkewMs = 0;
  function noteServerClock(response) {
    const date = Date.parse(response.headers.get('Date') || '');
    if (!Number.isNaN(date)) serverSkewMs = date + 500 - Date.now();
  }
  function serverNow() { return Date.now() + serverSkewMs; }

  function sessionEnded() {
    const live = $('live');
    if (!live) return;
    live.className = 'live stale';
    live.replaceChildren('Your session has ended. ', el('a', { href: '/ui/login' }, 'Log in again'), ' to carry on.');
    stopped = true;
  }

  // A readable sentence for an API error, for the message next to the control that caused it.
  function explain(err) {
    // A bug in a renderer is not an API error; say so instead of failing inside the poll's catch.
    if (!(err instanceof ApiError)) return 'The page could not show the answer (' + (err && err.message) + ').';
    switch (err.code) {
      case 'drain_active':
        return capitalise(err.detail) + '. The Drain panel has the Pause and Abort buttons.';
      case 'unauthorized':
        return 'Your session has ended: log in again, then retry.';
      case 'forbidden':
        return 'Not allowed: ' + err.detail + '.';
      case 'csrf_failed':
        return 'Refused for safety: ' + err.detail + '.';
      case 'network':
      case 'timeout':
        return err.detail;
      default:
        return capitalise(err.detail) + (err.detail.endsWith('.') ? '' : '.');
    }
  }

  function capitalise(text) { return text ? text[0].toUpperCase() + text.slice(1) : text; }

  // Once the operator edits a field, its complaint is stale: drop it.
  function clearOnInput(inputId, errorId) {
    $(inputId).addEventListener('input', () => {
      $(inputId).removeAttribute('aria-invalid');
      show($(errorId), '');
    });
  }

  function show(node, text) {
    if (!node) return;
    node.textContent = text;
    node.hidden = !text;
  }

  // ---- formatting ------------------------------------------------------------------------

  function pct(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return '–';
    const d = digits === undefined ? (Number.isInteger(value) ? 0 : 2) : digits;
    return value.toFixed(d) + ' %';
  }
  function trim(value) { return String(Number(value.toFixed(4))); }
  // API values for text: an absent value shows as a dash, never as "null" or "undefined".
  function text(value) { return value === null || value === undefined || value === '' ? '–' : String(value); }
  function count(n) { return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'); }
  function clock(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    return d.toLocaleTimeString('en-GB', { hour12: false });
  }

  // ---- live status ---------------------------------------------------------------------

  let stopped = false;
  function setLive(ok, err) {
    const live = $('live');
    if (!live || stopped) return;
    if (ok) {
      live.className = 'live';
      live.textContent = 'Live · updated ' + new Date().toLocaleTimeString('en-GB', { hour12: false }) + ' · every ' + POLL_MS / 1000 + ' s';
    } else {
      live.className = 'live stale';
      const unreachable = err instanceof ApiError && (err.code === 'network' || err.code === 'timeout');
      const others = unreachable ? otherConsoles() : null;
      live.replaceChildren(...(others ? [others] : []), 'Not updating: ' + explain(err) + ' Retrying every ' + POLL_MS / 1000 + ' s; the values below may be old.');
    }
  }

  // ---- coordinator replicas ------------------------------------------------------------------

  // The replicas as GET /v1/cluster last listed them: the page is served by one replica, and
  // when that one stops answering the others' consoles are offered as links (calling them from
  // here would need CORS and their cookies; a link is the honest version).
  function renderCluster() {
    const c = view.cluster;
    const node = $('cluster');
    if (!node || !c) return;
    const me = (c.replicas || []).find((r) => r.self) || {};
    const lost = (c.replicas || []).filter((r) => r.status === 'lost').length;
    $('cluster-self').replaceChildren('This page talks to ', el('strong', { id: 'cluster-me' }, text(c.self || 'this node')),
      me.zone ? ' in ' + me.zone : '', ' · log ', el('code', {}, text(c.log && c.log.kind)), ' ', text(c.log && c.log.id),
      lost ? ' · ' + lost + ' lost' : '');
    const rows = (c.replicas || []).map((r) => {
      const status = r.status === 'lost'
        ? el('span', { class: 'state state-down' }, '✕ Lost')
        : el('span', { class: 'state state-active' }, '✓ Live');
      const link = r.self || !r.url ? text(r.self ? 'this one' : '') : el('a', { href: r.url + '/ui' }, r.url + '/ui');
      return el('tr', { class: r.status === 'lost' ? 'replica-lost' : '', 'data-replica': text(r.id) },
        el('td', {}, text(r.id), r.self ? ' (this one)' : ''), el('td', {}, text(r.zone)), el('td', {}, status),
        el('td', { class: 'num' }, count(r.applied_version)), el('td', { class: 'num' }, count(r.behind)),
        el('td', { class: 'num' }, count(r.format)), el('td', {}, clock(r.last_seen)), el('td', {}, link));
    });
    node.replaceChildren(el('div', { class: 'table-wrap' }, stacked(el('table', { class: 'replicas', id: 'replicas' },
      el('thead', {}, el('tr', {}, ...['Replica', 'Zone', 'Status', 'Version', 'Behind', 'Format', 'Last seen', 'Console'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...rows)))));
  }

  // The release channels of GET /v1/routing, every domain's. Operators get Edit and Delete on
  // each row, and the form below the table (see "release channels" further down).
  function renderChannels() {
    const node = $('channels');
    if (!node || !view.routing) return;
    if (CAN_CHANGE) syncChannelZones(view.routing);
    const freeze = view.routing.channel_freeze;
    show($('channel-change'), freeze
      ? '❄ Changing ' + freeze.channel + ' loss-lessly: writes of ' + (freeze.services || []).join(', ') + ' are frozen for units ' +
        (freeze.units || 'none') + ((freeze.users || []).length ? ' and ' + freeze.users.length + ' listed user(s)' : '') +
        ' until every live subscriber has the change (reads go on).'
      : '');
    const list = view.routing.channels || [];
    if (!list.length) {
      node.replaceChildren(el('p', { class: 'muted', id: 'no-channels' }, 'No release channel: every service follows the map.'));
      return;
    }
    const until = (ms) => ms ? new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : 'never';
    const rows = list.map((c) => {
      const state = c.suspended
        ? el('span', { class: 'state state-down' }, '❚❚ Suspended: ' + (c.fallback === 'reject' ? 'its users are refused' : 'its users follow the map'))
        : el('span', { class: 'state state-active' }, '✓ Active');
      const users = (c.users || []).length;
      const who = [c.units ? 'units ' + c.units : '', users ? users + ' named user' + (users === 1 ? '' : 's') : ''].filter(Boolean).join(' + ');
      const cells = [
        el('td', {}, text(c.name)), el('td', {}, text((c.services || []).join(', '))), el('td', {}, text(c.domain)),
        el('td', {}, text(c.zone) + ' (' + text(c.lane) + ')'), el('td', { class: 'num' }, pct(c.share_percent)),
        el('td', {}, text(who)), el('td', {}, text(c.fallback)), el('td', {}, until(c.expires_at_ms)),
        el('td', { class: 'channel-state' }, state)];
      if (CAN_CHANGE) {
        cells.push(el('td', { class: 'channel-actions' },
          el('button', { type: 'button', class: 'quiet', 'data-edit-channel': text(c.name) }, 'Edit'), ' ',
          el('button', { type: 'button', class: 'quiet', 'data-delete-channel': text(c.name) }, 'Delete…')));
      }
      return el('tr', { 'data-channel': text(c.name) }, ...cells);
    });
    const heads = ['Channel', 'Services', 'Domain', 'Zone', 'Share', 'Selects', 'Fallback', 'Expires', 'State'];
    if (CAN_CHANGE) heads.push('Change');
    node.replaceChildren(el('div', { class: 'table-wrap' }, stacked(el('table', { class: 'channels', id: 'channels-table' },
      el('thead', {}, el('tr', {}, ...heads.map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...rows)))));
  }

  // When this page's replica does not answer: say so, and link the other replicas' consoles.
  function otherConsoles() {
    const c = view.cluster;
    const others = ((c && c.replicas) || []).filter((r) => !r.self && r.url);
    if (!others.length) return null;
    const me = ((c && c.replicas) || []).find((r) => r.self) || {};
    const links = [];
    for (const r of others) {
      if (links.length) links.push(' · ');
      links.push(el('a', { href: r.url + '/ui', class: 'replica-link' }, text(r.id) + (r.zone ? ' (' + r.zone + ')' : '')));
      if (r.status === 'lost') links.push(' (lost when last seen)');
    }
    // The table is from before: mark this replica's own row, which it can no longer update.
    const row = document.querySelector('#replicas tr[data-replica="' + CSS.escape(text(me.id)) + '"]');
    if (row) {
      row.className = 'replica-lost';
      row.children[2].replaceChildren(el('span', { class: 'state state-down' }, '✕ Not answering'));
    }
    return el('span', { id: 'replica-down' }, 'The replica serving this page (' + text(me.id) + (me.url ? ', ' + me.url : '') +
      ') is not answering. Open another replica\'s console: ', ...links, '. ');
  }

  // ---- overview --------------------------------------------------------------------------

  const view = {
    routing: null,
    zones: null,
    drains: [],
    plans: [], // for the zones' "Evacuate" actions
    lastChange: null, // the newest audit entry
    history: {}, // zone -> [{t, rate}] over the last HISTORY_MS, as sampled by tidegate
    historyEvery: '',
    applying: false, // a dial change is on its way: Enter again must not send a second one
    editing: false, // the operator moved the dial and has not confirmed or cancelled yet
    confirm: null, // {target, version} while the confirm step is open
    force: null, // the capacity refusal's detail while the force step is open
    restore: null, // the zone whose restore step is open
    restoring: false, // a restore is on its way
    cluster: null, // the last GET /v1/cluster answer: who else to offer when this replica dies
  };

  // ---- the table's zones -------------------------------------------------------------------

  // The zones of GET /v1/routing (`zones`, in index order: blue is 0, green 1, then any further
  // zone), each with its name, lane, class, whether it is retired and how many units it owns.
  // The overview's cards, split and forms are drawn from it, so they work for any number.
  function tableZones(r) { return (r && r.zones) || []; }
  function liveZones(r) { return tableZones(r).filter((z) => !z.retired); }

  // The rule of PUT /v1/dial: it applies while blue and green are the only live zones; with a
  // third live zone tidegate refuses it (409 needs_two_zones) and units move as sets instead.
  function dialApplies(r) {
    if (!r || !r.zones) return true;
    const live = liveZones(r).map((z) => z.index);
    return live.length === 2 && live[0] === 0 && live[1] === 1;
  }

  // Blue and green keep their colours. A further zone whose lane is a colour we have (`red`,
  // `purple`, …) is shown in it; any other takes one of six more, by index.
  const LANE_COLOURS = { red: 'red', purple: 'z2', orange: 'z3', teal: 'z4', pink: 'z5', olive: 'z6', grey: 'z7', gray: 'z7' };
  function laneClass(index, lane) {
    if (index === 0) return 'blue';
    if (index === 1) return 'green';
    return LANE_COLOURS[lane] || 'z' + (2 + ((index - 2) % 6));
  }

  // A zone's units as the API writes unit sets ("0-24,50-59"), from a domain's `unit_map`.
  function unitsOf(map, zone) {
    return (map || []).filter((run) => run.zone === zone).map((run) => {
      const [first, last] = run.units.split('-');
      return first === last ? first : first + '-' + last;
    }).join(',');
  }

  // How many units each zone owns in a `unit_map` (a dry run's resulting map).
  function unitCounts(map) {
    const out = {};
    for (const run of map || []) {
      const [first, last] = run.units.split('-').map(Number);
      out[run.zone] = (out[run.zone] || 0) + (last - first + 1);
    }
    return out;
  }

  // ---- routing domains --------------------------------------------------------------------

  // Every routing domain of the table: the default domain (the table's own `unit_map`) first,
  // then the named ones of GET /v1/routing `domains`.
  function domainNames(r) { return [DEFAULT_DOMAIN, ...Object.keys((r && r.domains) || {}).sort()]; }
  // Whether the table has named domains: then every control and text names the domain it acts on.
  function manyDomains(r) { return Object.keys((r && r.domains) || {}).length > 0; }

  // The overview's selected domain. The URL keeps it (`?domain=search`), so a reload or a shared
  // link shows the same domain; `checked` turns true once the first table said it exists.
  const domainView = {
    selected: new URLSearchParams(location.search).get('domain') || DEFAULT_DOMAIN,
    checked: false,
    names: null, // the options the select lists, so a poll rebuilds it only when they change
  };

  // The table as one domain sees it: its unit map, the units each zone owns in it, and on a
  // two-zone table its dial (blue and green shares).
  function domainTable(r, name) {
    const zones = tableZones(r);
    const named = name && name !== DEFAULT_DOMAIN && r.domains && r.domains[name];
    if (!named) {
      const counts = {};
      for (const z of zones) counts[z.name] = z.units;
      return { name: DEFAULT_DOMAIN, unit_map: r.unit_map || [], counts, blue_percent: r.blue_percent, green_percent: r.green_percent };
    }
    const counts = unitCounts(named.unit_map);
    const share = (z) => (z ? (counts[z.name] || 0) * 100 / r.units : 0);
    return {
      name, unit_map: named.unit_map, counts,
      blue_percent: typeof named.blue_percent === 'number' ? named.blue_percent : share(zones[0]),
      green_percent: share(zones[1]),
    };
  }
  function selectedTable(r) { return domainTable(r, domainView.selected); }

  // "domain search" in a sentence, for the selected domain or a drain's.
  function domainWords(name) { return 'domain ' + name; }
  // The domains a change of `name` leaves alone, as a sentence (none: '').
  function othersStay(r, name) {
    const others = domainNames(r).filter((n) => n !== name);
    if (!others.length) return '';
    return others.length === 1 ? ' Domain ' + others[0] + ' does not move.' : ' Domains ' + others.join(', ') + ' do not move.';
  }
  // A dark tag with the selected domain, next to the title of every card that shows or changes
  // one domain; none while the table has only the default domain.
  function domainTag(r, name) {
    if (!manyDomains(r) && name === DEFAULT_DOMAIN) return null;
    return el('span', { class: 'domain-tag', 'data-domain': name, title: 'routing domain ' + name }, '◆ ' + name);
  }

  // The domain selector follows the table (a domain added shows up) and checks the URL's domain
  // once: a name the table does not have is said, and the default domain shown instead.
  function syncDomains(r) {
    const names = domainNames(r);
    if (!domainView.checked) {
      domainView.checked = true;
      const asked = domainView.selected;
      if (!names.includes(asked)) {
        domainView.selected = DEFAULT_DOMAIN;
        setDomainUrl(DEFAULT_DOMAIN);
        show($('domain-unknown'), 'There is no routing domain “' + asked + '” in this table (domains: ' + names.join(', ') +
          '). Showing the default domain instead: choose another above.');
      }
    }
    const select = $('domain-select');
    if (!select) return;
    const key = names.join(',');
    if (key !== domainView.names) {
      domainView.names = key;
      select.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    }
    select.value = domainView.selected;
    const name = domainView.selected;
    $('domain-bar').classList.toggle('named', name !== DEFAULT_DOMAIN);
    $('domain-hint').textContent = !manyDomains(r)
      ? 'This table has one routing domain, default: every control below acts on it.'
      : 'Showing ' + domainWords(name) + ': the dial, the split, the zones’ units' + (CAN_CHANGE ? ', Move units and Start a drain act on ' + name + ' only.' : ' are ' + name + '’s.') +
        othersStay(r, name) + ' Error rates and load are per zone, shared by every domain.';
    const drainHref = '/ui/drain' + domainQuery('?');
    for (const id of ['nav-drain', 'drain-start']) if ($(id)) $(id).setAttribute('href', drainHref);
    if ($('drain-start')) $('drain-start').textContent = manyDomains(r) ? 'Start a drain in ' + domainWords(name) + '…' : 'Start a drain…';
  }

  // The selected domain as a query parameter for a link (none for the default domain).
  function domainQuery(sep) {
    const name = domainView.selected;
    return name === DEFAULT_DOMAIN ? '' : sep + 'domain=' + encodeURIComponent(name);
  }

  function setDomainUrl(name) {
    const url = new URL(location.href);
    if (name === DEFAULT_DOMAIN) url.searchParams.delete('domain');
    else url.searchParams.set('domain', name);
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }

  // Another domain chosen: every open step was made for the previous one (its numbers, its
  // domain), so it closes, and the page is drawn again for the new one at once.
  function chooseDomain(name) {
    if (name === domainView.selected) return;
    domainView.selected = name;
    setDomainUrl(name);
    show($('domain-unknown'), '');
    if (CAN_CHANGE) {
      if (view.confirm) closeConfirm(true);
      view.editing = false;
      if (unitsView.confirm) closeUnitsConfirm();
      for (const id of ['dial-ok', 'dial-error', 'units-ok', 'units-error']) show($(id), '');
    }
    if (!view.routing) return;
    syncDomains(view.routing);
    renderDial();
    renderZones();
    renderDrain();
  }

  function wireDomain() {
    const select = $('domain-select');
    if (select) select.addEventListener('change', () => chooseDomain(select.value));
  }

  // The charts come from tidegate's own samples (GET /v1/zones/history), so a page opened in
  // the middle of an incident shows the minutes before it, and every operator sees the same line.
  async function refreshOverview() {
    const [routing, zones, drains, history, audit, cluster, plans] = await Promise.all([
      api('GET', '/v1/routing'),
      api('GET', '/v1/zones'),
      api('GET', '/v1/drains'),
      api('GET', '/v1/zones/history'),
      api('GET', '/v1/audit?limit=1'),
      api('GET', '/v1/cluster'),
      api('GET', '/v1/plans'),
    ]);
    view.cluster = cluster;
    view.plans = plans.plans || [];
    view.routing = routing;
    view.zones = zones;
    view.drains = drains.drains || [];
    view.lastChange = (audit.entries || [])[0] || null;
    view.historyEvery = history.every || '';
    view.history = {};
    for (const z of history.zones || []) {
      view.history[z.zone] = (z.samples || []).map((s) => ({ t: s.at_ms, rate: s.error_rate }));
    }
    syncDomains(routing);
    renderDial();
    renderLastChange();
    renderFrozen();
    renderZones();
    renderDrain();
    renderChannels();
    renderCluster();
  }

  // Frozen units by domain, in words: `40-49` or `40-49 (default), 0-9 (search)`.
  function frozenWords(frozen) {
    const entries = Object.entries(frozen || {});
    if (entries.length === 1) return text(entries[0][1]);
    return entries.map(([d, units]) => text(units) + ' (' + d + ')').join(', ');
  }

  // Units frozen by a loss-less move in progress (a dial or unit move, a drain step).
  function renderFrozen() {
    const node = $('dial-frozen');
    if (!node || !view.routing) return;
    const frozen = view.routing.frozen || {};
    show(node, Object.keys(frozen).length
      ? '❄ Units ' + frozenWords(frozen) + ' are frozen by a loss-less move: their users’ writes wait until every live subscriber has the move (reads go on).'
      : '');
  }

  // Who made the newest change, when, and why: the first question in an incident.
  function renderLastChange() {
    const node = $('last-change');
    if (!node) return;
    const e = view.lastChange;
    if (!e) {
      node.textContent = 'No change has been made yet.';
      return;
    }
    const ago = Math.max(0, Math.round((serverNow() - e.at_ms) / 1000));
    node.replaceChildren('Last change: ', el('strong', { id: 'last-change-by' }, text(e.by)), ' ',
      el('code', {}, text(e.action)), ' (' + text(e.from) + ' → ' + text(e.to) + ') at ',
      el('time', { id: 'last-change-at', datetime: e.at }, clock(e.at)), ' (' + since(ago) + '): “' + text(e.reason) + '”');
  }

  function since(seconds) {
    if (seconds < 60) return seconds + ' s ago';
    if (seconds < 3600) return Math.floor(seconds / 60) + ' min ago';
    return Math.floor(seconds / 3600) + ' h ' + Math.floor((seconds % 3600) / 60) + ' min ago';
  }

  function renderDial() {
    const r = view.routing;
    const applies = dialApplies(r);
    const dv = selectedTable(r);
    $('dial-title').textContent = applies ? 'Traffic dial' : 'Traffic split';
    $('dial-domain').replaceChildren(domainTag(r, dv.name) || '');
    $('routing-version').textContent = r.version;
    $('blue-percent').textContent = pct(dv.blue_percent);
    $('green-percent').textContent = pct(dv.green_percent);
    renderSplit(r, dv);
    const pins = Object.keys(r.pins || {}).length;
    $('routing-pins').textContent = pins === 1 ? '1 pinned user' : pins + ' pinned users';
    renderGlobalWriter(r);
    if (!CAN_CHANGE) return;
    syncUnitZones(r);
    $('units-domain').replaceChildren(domainTag(r, dv.name) || '');
    if (unitsView.confirm && unitsView.confirm.version !== r.version) {
      show($('units-stale'), 'The routing changed while you were deciding: it is now at version ' + r.version +
        '. Confirming will be refused; cancel and preview the move again.');
    }
    // With a third live zone the dial is refused: say why and point at unit moves instead.
    $('dial-form').hidden = !applies;
    $('dial-n-zones').hidden = applies;
    if (!applies) {
      const live = liveZones(r);
      $('dial-live-count').textContent = live.length;
      $('dial-live-names').textContent = live.map((z) => z.name).join(', ');
      if (view.confirm) closeConfirm(true);
      return;
    }
    // While the operator is deciding, the poll updates what is *current* but never touches
    // the value they are choosing.
    if (!view.editing) setDialInputs(dv.blue_percent);
    if (view.confirm && view.confirm.version !== r.version) {
      show($('dial-stale'), 'The routing changed while you were deciding: it is now at version ' + r.version + ' with ' +
        pct(dv.blue_percent) + ' blue' + (manyDomains(r) ? ' in ' + domainWords(dv.name) : '') + '. Confirming will be refused; cancel and review again.');
    }
  }

  // The split bar and legend: blue and green as always, then every further zone that is live or
  // still owns units, each with its share of the units.
  function renderSplit(r, dv) {
    const owned = (z) => dv.counts[z.name] || 0;
    const more = tableZones(r).filter((z) => z.index >= 2 && (!z.retired || owned(z) > 0));
    const share = (z) => owned(z) * 100 / r.units;
    $('split-blue').style.width = dv.blue_percent + '%';
    for (const node of $('split').querySelectorAll('.split-extra')) node.remove();
    const green = $('split-green');
    if (!more.length) {
      green.style.flex = '';
      green.style.width = '';
      $('split-more').replaceChildren();
      return;
    }
    green.style.flex = '0 0 auto';
    green.style.width = dv.green_percent + '%';
    for (const z of more) {
      const segment = el('div', { class: 'split-extra split-' + laneClass(z.index, z.lane), 'data-zone': z.name });
      segment.style.width = share(z) + '%';
      $('split').append(segment);
    }
    $('split-more').replaceChildren(...more.flatMap((z) => [
      el('span', { class: 'sep' }),
      el('span', { class: 'legend-item' },
        el('span', { class: 'chip chip-' + laneClass(z.index, z.lane) }, capitalise(z.lane) + ' · ' + z.name), ' ',
        el('strong', { id: 'share-' + z.name }, pct(share(z))))]));
  }

  // The zone that takes writes to global data (the table's `global_writer`), independent of
  // which zone owns a user's unit.
  function renderGlobalWriter(r) {
    const node = $('global-writer');
    if (!node) return;
    const g = r.global_writer || {};
    node.replaceChildren('Global writes: ',
      el('strong', { id: 'global-writer-zone' }, g.zone ? g.zone + (g.lane ? ' (' + g.lane + ')' : '') : 'no zone named'),
      g.read_only ? ' · ' : '',
      g.read_only ? el('span', { class: 'badge state-degraded', id: 'global-read-only' }, '⚠ Global data is read-only') : '',
      g.zone && !g.read_only ? ' · read-write' : '',
      g.zone ? '' : el('span', { class: 'hint' }, ' (PUT /v1/global-writer names one)'));
  }

  function setDialInputs(value) {
    $('dial-range').value = value;
    $('dial-number').value = trim(value);
  }

  function wireDial() {
    const range = $('dial-range');
    const number = $('dial-number');
    range.addEventListener('input', () => {
      view.editing = true;
      number.value = trim(Number(range.value));
      number.removeAttribute('aria-invalid');
    });
    number.addEventListener('input', () => {
      view.editing = true;
      if (number.value !== '') range.value = number.value;
    });
    $('dial-form').addEventListener('submit', (event) => {
      event.preventDefault();
      reviewDial();
    });
    $('dial-cancel').addEventListener('click', () => closeConfirm(true));
    $('dial-apply').addEventListener('click', applyDial);
    $('dial-domain-name').addEventListener('input', () => {
      $('dial-domain-name').removeAttribute('aria-invalid');
      show($('dial-confirm-error'), '');
      updateDialGo();
    });
    $('dial-domain-name').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); applyDial(); }
    });
    clearOnInput('dial-reason', 'dial-confirm-error');
    $('dial-reason').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); applyDial(); }
    });
    $('dial-force-word').addEventListener('input', () => { show($('dial-force-error'), ''); updateForceGo(); });
    clearOnInput('dial-force-reason', 'dial-force-error');
    for (const id of ['dial-force-word', 'dial-force-reason']) {
      $(id).addEventListener('keydown', (event) => {
        if (event.key === 'Enter') { event.preventDefault(); applyDial(true); }
      });
    }
    $('dial-force-go').addEventListener('click', () => applyDial(true));
  }

  // The capacity check refused the move (409 insufficient_capacity): the operator may force
  // it, by typing "force" and a reason of their own; the API records it as forced in the audit.
  const FORCE_WORD = 'force';
  function openForce(err) {
    // The API's hint ("send force: true") is for API callers: this step is how the page says it.
    const detail = err.detail.replace(/; send "force": true to move anyway \(audited\)/, '');
    view.force = detail;
    $('dial-force-detail').textContent = capitalise(detail) + (detail.endsWith('.') ? '' : '.');
    $('dial-force-word').value = '';
    $('dial-force-reason').value = '';
    show($('dial-force-error'), '');
    $('dial-force').hidden = false;
    updateForceGo();
    $('dial-force-word').focus();
  }
  function closeForce() {
    view.force = null;
    $('dial-force').hidden = true;
  }
  function updateForceGo() {
    $('dial-force-go').disabled = view.applying || $('dial-force-word').value !== FORCE_WORD;
  }

  function dialProblem(text) {
    const number = $('dial-number');
    if (text === '') return 'Enter the new blue share, from 0 to 100 %.';
    const value = Number(text);
    if (!Number.isFinite(value) || value < 0 || value > 100) return 'The blue share must be between 0 and 100 %.';
    const units = value / STEP;
    if (Math.abs(units - Math.round(units)) > 1e-6) {
      const low = Math.floor(units) * STEP;
      return 'The dial moves in steps of ' + trim(STEP) + ' %: choose ' + trim(low) + ' or ' + trim(low + STEP) + ' %.';
    }
    number.removeAttribute('aria-invalid');
    return null;
  }

  function reviewDial() {
    show($('dial-ok'), '');
    show($('dial-error'), '');
    const r = view.routing;
    if (!r) return;
    const text = $('dial-number').value.trim();
    const problem = dialProblem(text);
    if (problem) {
      $('dial-number').setAttribute('aria-invalid', 'true');
      show($('dial-error'), problem);
      return;
    }
    const target = Number(text);
    const dv = selectedTable(r);
    const many = manyDomains(r);
    const where = many ? ' in ' + domainWords(dv.name) : '';
    if (Math.abs(target - dv.blue_percent) < 1e-9) {
      show($('dial-error'), 'The dial' + where + ' is already at ' + pct(target) + ' blue; there is nothing to change.');
      return;
    }
    // With several domains the operator types the domain's name: a dial moved in the wrong
    // domain is exactly the mistake a glance at the page does not catch.
    view.confirm = { target, version: r.version, domain: dv.name, typed: many };
    const moving = Math.abs(target - dv.blue_percent);
    const [from, to] = target < dv.blue_percent
      ? ['blue (' + BLUE_ZONE + ')', 'green (' + GREEN_ZONE + ')']
      : ['green (' + GREEN_ZONE + ')', 'blue (' + BLUE_ZONE + ')'];
    const requests = (view.zones ? view.zones.zones : []).reduce((sum, z) => sum + (z.requests || 0), 0);
    const share = trim(moving) + ' % of users';
    // Requests are reported per zone, not per domain: with several domains they say nothing
    // about how many of one domain's users move, so no estimate is made.
    const summary = many
      ? 'In ' + domainWords(dv.name) + ', ' + share + ' will move from ' + from + ' to ' + to + '.'
      : requests > 0
        ? share + ' (about ' + count(Math.round(requests * moving / 100)) + ' users of the last ' + WINDOW + ') will move from ' + from + ' to ' + to + '.'
        : share + ' will move from ' + from + ' to ' + to + '. No traffic was reported in the last ' + WINDOW + ', so how many users that is is unknown.';
    $('dial-summary').textContent = summary + ' The ' + (many ? dv.name + ' ' : '') + 'dial goes from ' + pct(dv.blue_percent) + ' to ' + pct(target) + ' blue.' +
      (many ? othersStay(r, dv.name) : '');
    $('dial-domain-confirm').hidden = !many;
    $('dial-domain-expected').textContent = dv.name;
    $('dial-domain-name').value = '';
    $('dial-apply').textContent = many ? 'Move the ' + dv.name + ' dial' : 'Move the dial';
    show($('dial-stale'), '');
    show($('dial-confirm-error'), '');
    $('dial-confirm').hidden = false;
    $('dial-review').disabled = true;
    updateDialGo();
    (many ? $('dial-domain-name') : $('dial-reason')).focus();
  }

  // Whether the confirm step's domain name is typed (always, when the table has one domain).
  function dialTyped() {
    const c = view.confirm;
    return !!c && (!c.typed || $('dial-domain-name').value === c.domain);
  }
  function updateDialGo() {
    $('dial-apply').disabled = view.applying || !dialTyped();
  }

  function closeConfirm(resetValue) {
    view.confirm = null;
    view.editing = false;
    $('dial-confirm').hidden = true;
    $('dial-review').disabled = false;
    $('dial-domain-name').value = '';
    show($('dial-confirm-error'), '');
    closeForce();
    if (resetValue && view.routing) setDialInputs(selectedTable(view.routing).blue_percent);
  }

  async function applyDial(force) {
    const c = view.confirm;
    if (!c || view.applying) return;
    force = force === true;
    if (force && (!view.force || $('dial-force-word').value !== FORCE_WORD)) return;
    if (!dialTyped()) {
      $('dial-domain-name').setAttribute('aria-invalid', 'true');
      show($('dial-confirm-error'), 'Type the domain’s name, ' + c.domain + ', to confirm which domain’s dial moves.');
      $('dial-domain-name').focus();
      return;
    }
    $('dial-domain-name').removeAttribute('aria-invalid');
    const field = force ? 'dial-force-reason' : 'dial-reason';
    const errorBox = force ? 'dial-force-error' : 'dial-confirm-error';
    const reason = $(field).value.trim();
    if (!reason) {
      $(field).setAttribute('aria-invalid', 'true');
      show($(errorBox), force
        ? 'Give the reason for forcing past the capacity check: it goes into the audit log with your name.'
        : 'Give a reason: it goes into the audit log with your name.');
      $(field).focus();
      return;
    }
    $(field).removeAttribute('aria-invalid');
    view.applying = true;
    updateDialGo();
    if (force) updateForceGo();
    show($('dial-ok'), '');
    show($('dial-error'), '');
    try {
      const payload = { blue_percent: c.target, expected_version: c.version, reason };
      if (c.domain !== DEFAULT_DOMAIN) payload.domain = c.domain;
      if (force) payload.force = true;
      payload.freeze = $('dial-freeze').checked;
      const result = await api('PUT', '/v1/dial', payload);
      $('dial-reason').value = '';
      $('dial-freeze').checked = FREEZE_DEFAULT;
      closeConfirm(false);
      const now = domainTable(result, c.domain);
      show($('dial-ok'), result.change
        ? 'Freezing: the users the dial moves have their writes frozen (units ' + frozenWords(result.change.frozen) + ', routing version ' + result.version +
          '); the dial moves to ' + pct(c.target) + ' once every live subscriber has the freeze.'
        : 'Done: the ' + (c.typed ? c.domain + ' ' : '') + 'dial is at ' + pct(now.blue_percent) + ' blue (routing version ' + result.version + ')' + (force ? ', forced past the capacity check.' : '.'));
      await poll(true);
    } catch (err) {
      if (err.code === 'version_conflict') {
        // Someone else moved the dial first. Never retry with the new version behind the
        // operator's back: show what is current now and let them decide again.
        closeConfirm(false);
        await poll(true);
        const now = view.routing;
        show($('dial-ok'), '');
        show($('dial-error'), 'Not applied: someone else changed the routing while you were deciding (you started from version ' +
          c.version + '; it is now version ' + (err.body.current_version || (now && now.version)) + '). The dial now shows the current value, ' +
          (now ? pct(domainTable(now, c.domain).blue_percent) + ' blue' + (c.typed ? ' in ' + domainWords(c.domain) : '') : 'reloaded') +
          '. Review it, and move it again if you still need to.');
      } else if (err.code === 'insufficient_capacity' && !force) {
        show($('dial-confirm-error'), 'Not applied: the capacity check refused it (why, below). Choose another share, or force the move.');
        openForce(err);
      } else {
        show($(errorBox), explain(err));
      }
    } finally {
      view.applying = false;
      updateDialGo();
      if (view.force) updateForceGo();
    }
  }

  const STATE_TEXT = {
    active: '✓ Active',
    draining: '↘ Draining',
    paused: '❚❚ Drain paused',
    restoring: '↗ Restoring',
    drained: '○ Drained',
    down: '✕ Down',
    degraded: '⚠ Degraded',
    unknown: '? Health unknown',
    retired: '⊘ Retired',
    empty: '○ Owns no units',
  };

  const CLASS_TEXT = {
    rzone: 'rzone: owns units of users',
    gzone: 'gzone: may take writes to global data',
    czone: 'czone: serves reads of global data',
  };

  // Load against capacity less headroom; unknown is said, never shown as fine.
  function capacityLine(c) {
    if (!c || !c.checked) return null;
    const load = c.load_rps === null || c.load_rps === undefined ? 'unknown' : Math.round(c.load_rps) + ' rps';
    const allowed = c.allowed_rps === null || c.allowed_rps === undefined ? 'unknown (' + (c.capacity_unknown_reason || 'no reading') + ')' : Math.round(c.allowed_rps) + ' rps';
    return el('p', { class: 'capacity' }, 'Load ' + load + ' of ' + allowed + ' allowed');
  }

  // What a drain is to an operator: an evacuation (mode `evacuate`), a restore (it grows the
  // zone back) or a drain. Every place that shows a drain names it with this word.
  function drainKind(d) {
    if (d.mode === 'evacuate') return 'Evacuation';
    if (typeof d.target_percent === 'number' && typeof d.from_percent === 'number' && d.target_percent > d.from_percent) return 'Restore';
    return 'Drain';
  }

  // A hold is a drain (or run) that is not moving because something refuses the next step.
  // A capacity refusal gets its own badge: it is neither running nor failed.
  function capacityHeld(reason) { return !!reason && reason.includes('insufficient_capacity'); }
  function holdText(reason) { return String(reason || '').replace(/^holding: /, ''); }
  function heldBadge(reason, id) {
    return el('span', { class: 'badge state-held', id: id || null, 'data-state': 'running', 'data-held': 'capacity', title: holdText(reason) }, '◷ Held: capacity');
  }

  // The zone an evacuation (the latest drain of the zone, if it was one) left below where it
  // started, or whose share is 0: the overview offers to restore it, not to evacuate the other.
  function restorable(zone) {
    if (view.drains.some((d) => ACTIVE_DRAIN.includes(d.state))) return null;
    // Restores and evacuations are judged on the default domain's shares (a restore moves the
    // default domain; an evacuation every domain), whichever domain the page shows.
    const share = zone.default_share === undefined ? zone.share_percent : zone.default_share;
    if (share === 0) return { zone: zone.zone, why: 'drained' };
    const latest = view.drains.find((d) => d.zone === zone.zone);
    if (latest && latest.mode === 'evacuate' && typeof latest.from_percent === 'number' && share < latest.from_percent) {
      return { zone: zone.zone, why: 'evacuated' };
    }
    return null;
  }

  // What POST /v1/zones/<zone>/restore brings the zone back to when no target is given: its
  // share before its latest completed drain, or 50 %.
  function restoreTarget(zone) {
    const done = view.drains.find((d) => d.zone === zone && d.state === 'completed');
    return done && done.from_percent > 0 ? done.from_percent : 50;
  }

  function zoneState(zone) {
    const active = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state) && d.zone === zone.zone);
    if (active && active.mode === 'evacuate') {
      if (zone.state === 'draining') return '↘ Evacuating';
      if (zone.state === 'paused') return '❚❚ Evacuation paused';
    }
    return STATE_TEXT[zone.state] || zone.state;
  }

  function zoneAction(zone, restorableZones, two) {
    if (!CAN_CHANGE) return null;
    // Drains, evacuation plans and restores move users between blue and green: with more live
    // zones a zone's units move as sets, so its card offers to fill in the Move units form.
    if (!two) return zone.retired || !zone.units ? null : moveFromAction(zone);
    if (restorableZones.includes(zone.zone)) return restoreAction(zone.zone);
    const evacuating = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state) && d.mode === 'evacuate' && d.receiving_zone === zone.zone);
    if (evacuating) {
      return el('p', { class: 'evacuate hint', id: 'evacuate-blocked-' + zone.zone },
        'Evacuation ' + evacuating.id + ' of ' + evacuating.zone + ' is moving its users here.');
    }
    const other = restorableZones.find((name) => name !== zone.zone);
    if (other) {
      return el('p', { class: 'evacuate hint', id: 'evacuate-blocked-' + zone.zone },
        other + ' is evacuated and ' + zone.zone + ' carries its users: restore ' + other + ' before evacuating ' + zone.zone + '.');
    }
    return (zone.default_share === undefined ? zone.share_percent : zone.default_share) > 0 ? evacuateAction(zone.zone) : null;
  }

  // "Move <zone>'s units…": fills the Move units form with every unit the zone owns; the
  // operator chooses who receives them, and the form's preview and confirmation follow.
  function moveFromAction(zone) {
    return el('p', { class: 'evacuate' },
      el('button', { type: 'button', id: 'move-from-' + zone.zone, 'data-move-from': zone.zone }, 'Move ' + zone.zone + '’s units…'),
      el('span', { class: 'hint' }, ' fills in Move units with its ' + count(zone.units) + (zone.units === 1 ? ' unit' : ' units') +
        (manyDomains(view.routing) ? ' in ' + domainWords(domainView.selected) : '') + '; you choose the receiving zone'));
  }

  function restoreAction(zone) {
    return el('p', { class: 'evacuate' },
      el('button', { type: 'button', class: 'primary', id: 'restore-' + zone, 'data-restore': zone }, 'Restore ' + zone + '…'),
      el('span', { class: 'hint' }, ' brings users back gradually, to ' + pct(restoreTarget(zone)) + ', after your reason'));
  }

  // One card per zone of the table (GET /v1/routing), with the health, capacity and state of
  // GET /v1/zones where that reports the zone. A zone it does not report is never shown as
  // healthy: its state is "owns no units", "retired" or "health unknown".
  function zoneCards() {
    const r = view.routing;
    const health = (view.zones && view.zones.zones) || [];
    const zones = tableZones(r);
    if (!zones.length) return health.map((h, i) => Object.assign({}, h, { index: i, reported: true }));
    // Units and shares are the selected domain's; health, load and state are the zone's.
    const dv = selectedTable(r);
    return zones.map((z) => {
      const h = health.find((x) => x.zone === z.name);
      const units = dv.counts[z.name] || 0;
      const card = Object.assign({}, h || {}, {
        zone: z.name, color: z.lane, index: z.index, class: z.class, retired: z.retired,
        units, share_percent: units * 100 / r.units, default_share: z.units * 100 / r.units, reported: !!h,
      });
      if (z.retired) card.state = 'retired';
      else if (!h) card.state = units ? 'unknown' : 'empty';
      return card;
    });
  }

  function renderZones() {
    const z = view.zones;
    const r = view.routing;
    const two = dialApplies(r);
    const cards = zoneCards();
    const restorableZones = two ? cards.filter((c) => c.reported).map(restorable).filter(Boolean).map((x) => x.zone) : [];
    const writer = (r.global_writer || {}).zone;
    const many = manyDomains(r);
    const inDomain = many ? ' (' + domainView.selected + ')' : '';
    $('zones-domain').replaceChildren(domainTag(r, domainView.selected) || '');
    $('zones-window').textContent = 'error rate and requests over the last ' + z.window + '; charts: last 5 minutes, sampled by tidegate every ' + (view.historyEvery || '2s');
    $('zones').classList.toggle('zones-many', cards.length > 2);
    $('zones').replaceChildren(...cards.map((zone) => {
      const known = zone.reported && zone.error_rate !== null && zone.error_rate !== undefined;
      const why = zone.retired ? null
        : !zone.reported ? 'Health not reported: GET /v1/zones has no reading for ' + zone.zone + ', so its error rate and load are not shown.'
          : known ? null : 'Why unknown: ' + (zone.unknown_reason || 'no reading') + '.';
      return el('article', { class: 'zone zone-' + laneClass(zone.index, zone.color) + (zone.retired ? ' retired' : ''), id: 'zone-' + zone.zone,
        'data-state': zone.state, 'data-lane': zone.color, 'data-units': zone.units },
        el('div', { class: 'zone-head' },
          el('h3', {}, zone.zone),
          el('span', { class: 'chip chip-' + laneClass(zone.index, zone.color) }, zone.color),
          zone.class ? el('span', { class: 'chip chip-class', title: CLASS_TEXT[zone.class] || zone.class }, zone.class) : null,
          el('span', { class: 'badge state-' + zone.state, id: 'zone-state-' + zone.zone }, zoneState(zone)),
          writer && writer === zone.zone ? el('span', { class: 'badge state-writer', id: 'zone-writer-' + zone.zone, title: 'takes writes to global data' }, '✎ Global writer') : null),
        el('dl', {},
          el('div', {}, el('dt', {}, 'Units' + inDomain), el('dd', { id: 'zone-units-' + zone.zone }, count(zone.units) + (r ? ' of ' + count(r.units) : ''))),
          el('div', {}, el('dt', {}, 'Share of users' + inDomain), el('dd', { id: 'zone-share-' + zone.zone }, pct(zone.share_percent))),
          el('div', {}, el('dt', {}, 'Error rate'), el('dd', { class: known ? '' : 'muted' }, known ? pct(zone.error_rate * 100, 2) : 'unknown')),
          el('div', {}, el('dt', {}, 'Requests (' + z.window + ')'), el('dd', {}, count(zone.requests)))),
        why ? el('p', { class: 'unknown' }, why) : null,
        zone.retired ? el('p', { class: 'unknown' }, 'Retired: it keeps its index (and its lane range), owns no units and takes none.') : null,
        capacityLine(zone.capacity),
        zone.reported ? chart(view.history[zone.zone] || [], zone.zone) : null,
        zoneAction(zone, restorableZones, two));
    }));
    // The restore step's summary follows the poll (the zone's error rate now).
    if (view.restore) describeRestore(view.restore);
  }

  // "Restore <zone>…": a confirm step outside the zone cards (they are rebuilt on every poll),
  // with a reason; it calls POST /v1/zones/<zone>/restore, a drain back into the zone.
  function openRestore(zone) {
    view.restore = zone;
    $('restore-title').textContent = 'Restore ' + zone;
    $('restore-go').textContent = 'Restore ' + zone;
    show($('restore-error'), '');
    describeRestore(zone);
    $('restore-confirm').hidden = false;
    $('restore-reason').focus();
  }

  function describeRestore(zone) {
    const z = ((view.zones && view.zones.zones) || []).find((x) => x.zone === zone) || {};
    const known = z.error_rate !== null && z.error_rate !== undefined;
    $('restore-summary').textContent = 'Brings users back into ' + zone + ' gradually, as a drain from ' + pct(z.share_percent) +
      ' to ' + pct(restoreTarget(zone)) + ' with the guard of [drain]. ' + zone + '’s error rate now: ' +
      (known ? pct(z.error_rate * 100, 2) : 'unknown (' + text(z.unknown_reason) + ')') + '.' +
      (domainView.selected === DEFAULT_DOMAIN ? '' : ' A restore moves the default domain’s users (it takes no domain): ' +
        domainWords(domainView.selected) + ' does not move.');
  }

  function closeRestore() {
    view.restore = null;
    $('restore-confirm').hidden = true;
    show($('restore-error'), '');
  }

  async function sendRestore() {
    const zone = view.restore;
    if (!zone || view.restoring) return;
    const reason = $('restore-reason').value.trim();
    if (!reason) {
      $('restore-reason').setAttribute('aria-invalid', 'true');
      show($('restore-error'), 'Give a reason: it goes into the audit log with your name.');
      $('restore-reason').focus();
      return;
    }
    view.restoring = true;
    $('restore-go').disabled = true;
    try {
      const d = await api('POST', '/v1/zones/' + encodeURIComponent(zone) + '/restore', { reason });
      $('restore-reason').value = '';
      closeRestore();
      show($('drain-flash'), 'Restore of ' + zone + ' started: drain ' + d.id + ', back to ' + pct(d.target_percent) + '.');
    } catch (err) {
      show($('restore-error'), explain(err));
    } finally {
      view.restoring = false;
      $('restore-go').disabled = false;
      await poll(true);
    }
  }

  function wireRestore() {
    $('zones').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-restore]');
      if (button) openRestore(button.dataset.restore);
    });
    clearOnInput('restore-reason', 'restore-error');
    $('restore-reason').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); sendRestore(); }
    });
    $('restore-go').addEventListener('click', sendRestore);
    $('restore-cancel').addEventListener('click', closeRestore);
  }

  // The overview's "Evacuate <zone>": that zone's plan, through the plans page's preview and
  // typed confirmation. Without a plan it says so, links to how to write one, and offers the
  // hand-made evacuation drain.
  function evacuateAction(zone) {
    const plan = planForZone(view.plans, zone);
    if (plan) {
      return el('p', { class: 'evacuate' },
        el('a', { class: 'button-link warn', id: 'evacuate-' + zone, href: '/ui/plans?plan=' + encodeURIComponent(plan.name) + '&confirm=run' }, 'Evacuate ' + zone + '…'),
        el('span', { class: 'hint' }, ' runs plan ', el('strong', {}, plan.name), ' (RTO ' + text(plan.rto) + ') after a preview and your confirmation'));
    }
    return el('p', { class: 'evacuate', id: 'no-plan-' + zone },
      'No plan for ' + zone + ': ', el('a', { href: '/ui/plans#plans-write', id: 'write-plan-' + zone }, 'write one'),
      el('span', { class: 'hint' }, ' · or ', el('a', { id: 'evacuate-drain-' + zone, href: '/ui/drain?mode=evacuate&zone=' + encodeURIComponent(zone) + domainQuery('&') }, 'evacuate ' + zone + ' by hand (a drain)…')));
  }

  // A small SVG line of the error rate, with the guard's limit as a dashed line.
  function chart(points, zone) {
    const NS = 'http://www.w3.org/2000/svg';
    const W = 560, H = 96, L = 38, T = 8, B = 16;
    const active = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state));
    const limit = active ? active.guard.max_error_rate : Number(body.dataset.guardMax || 0.02);
    const rates = points.filter((p) => p.rate !== null && p.rate !== undefined).map((p) => p.rate);
    const top = Math.max(limit * 1.5, ...rates.map((r) => r * 1.15), 0.001);
    const now = serverNow(); // samples carry tidegate's clock
    const x = (t) => L + (W - L) * (1 - (now - t) / HISTORY_MS);
    const y = (r) => T + (H - T - B) * (1 - r / top);
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('class', 'chart');
    svg.setAttribute('role', 'img');
    if (zone) svg.setAttribute('data-zone', zone);
    const last = rates.length ? rates[rates.length - 1] : null;
    svg.setAttribute('aria-label', (zone ? zone + ': e' : 'E') + 'rror rate over the last 5 minutes' + (last === null ? ': unknown' : ', now ' + pct(last * 100, 2)));
    const add = (name, attrs, text) => {
      const node = document.createElementNS(NS, name);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text) node.textContent = text;
      svg.append(node);
      return node;
    };
    add('line', { x1: L, y1: H - B, x2: W, y2: H - B, class: 'axis' });
    add('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' });
    add('line', { x1: L, y1: y(limit), x2: W, y2: y(limit), class: 'limit' });
    add('text', { x: L - 3, y: y(limit) + 3, 'text-anchor': 'end' }, pct(limit * 100, limit * 100 < 1 ? 1 : 0).replace(' ', ''));
    add('text', { x: L - 3, y: H - B + 3, 'text-anchor': 'end' }, '0');
    add('text', { x: L, y: H - 2 }, '5 min ago');
    add('text', { x: W, y: H - 2, 'text-anchor': 'end' }, 'now');
    // Unknown readings break the line instead of being drawn as zero.
    let run = [];
    const flush = () => {
      if (run.length === 1) add('circle', { cx: run[0][0], cy: run[0][1], r: 1.8, class: 'line' });
      if (run.length > 1) add('polyline', { points: run.map((p) => p.join(',')).join(' '), class: 'line' });
      run = [];
    };
    for (const p of points) {
      if (p.rate === null || p.rate === undefined) { flush(); continue; }
      run.push([x(p.t).toFixed(1), y(p.rate).toFixed(1)]);
    }
    flush();
    return svg;
  }

  const DRAIN_TEXT = {
    running: '↘ Running',
    rolling_back: '↩ Rolling back',
    settling: '⧗ Settling (MQ backlog)',
    paused: '❚❚ Paused',
    completed: '✓ Completed',
    aborted: '■ Aborted',
    rolled_back: '↩ Rolled back',
  };

  function renderDrain() {
    const active = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state));
    const latest = view.drains[0];
    const target = $('drain-view');
    if (!active) {
      $('drain-title').textContent = 'Drain';
      const two = dialApplies(view.routing);
      const parts = [el('p', { id: 'no-drain' }, two ? 'No drain is active. The dial is free.'
        : 'No drain is active. With ' + liveZones(view.routing).length + ' live zones, move unit ranges instead, or start a drain that moves a zone\'s units to the zones you choose, step by step.')];
      if (latest) {
        parts.push(el('p', { class: 'muted', id: 'latest-drain' }, 'Latest: ' + drainKind(latest).toLowerCase() + ' ' + text(latest.id) + ' of ' + text(latest.zone) + drainDomain(latest) + ', ',
          el('span', { class: 'badge state-' + latest.state }, DRAIN_TEXT[latest.state] || latest.state),
          latest.finished_at ? ' at ' + clock(latest.finished_at) : '', ' (' + pct(latest.from_percent) + ' → ' + pct(latest.target_percent) + ').'));
      }
      target.replaceChildren(...parts);
      if (CAN_CHANGE) {
        $('drain-actions').hidden = true;
        $('drain-start-link').hidden = false;
      }
      return;
    }
    const d = active;
    const g = d.guard;
    const progress = Math.round((d.progress || 0) * 100);
    const bar = el('div', { class: 'progress-bar' });
    bar.style.width = progress + '%';
    const kind = drainKind(d);
    const held = d.state === 'running' && capacityHeld(d.hold_reason);
    $('drain-title').textContent = kind;
    target.replaceChildren(
      el('div', { class: 'zone-head' },
        el('h3', { id: 'drain-heading', 'data-mode': d.mode, 'data-domain': d.domain || DEFAULT_DOMAIN }, kind + ' ' + text(d.id) + drainDomain(d) + ': ' + (kind === 'Restore' ? text(d.receiving_zone) + ' → ' + text(d.zone) : text(d.zone) + ' → ' + text((d.receiving_zones && d.receiving_zones.length ? d.receiving_zones : [d.receiving_zone]).join(', ')))),
        held ? heldBadge(d.hold_reason, 'drain-state')
          : el('span', { class: 'badge state-' + d.state, id: 'drain-state' }, DRAIN_TEXT[d.state] || d.state)),
      el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': d.steps_total, 'aria-valuenow': d.steps_done, 'aria-label': 'Drain progress' }, bar),
      el('ul', { class: 'drain-facts' },
        el('li', {}, 'Step ', el('strong', { id: 'drain-steps' }, text(d.steps_done) + ' of ' + text(d.steps_total)), ' · ', text(d.zone), ' share now ',
          el('strong', {}, pct(d.current_percent)), ' (' + pct(d.from_percent) + ' → ' + pct(d.target_percent) + ', ' + (typeof d.step_percent === 'number' ? trim(d.step_percent) + ' %' : '–') + ' every ' + text(d.interval) + ')'),
        d.next_step_at ? el('li', {}, 'Next check and step at ' + clock(d.next_step_at)) : null,
        el('li', {}, 'Guard: error rate ≤ ' + pct(g.max_error_rate * 100, 1) + ' with ≥ ' + count(g.min_requests) + ' requests; ' + g.breaches + ' failed check(s) in a row → ' + (g.on_breach === 'rollback' ? 'roll back' : 'pause')),
        freezeFact(d.freeze),
        d.state === 'settling' && d.backlog_messages !== null && d.backlog_messages !== undefined
          ? el('li', {}, 'Waiting for ' + count(d.backlog_messages) + ' MQ message(s) in ' + text(d.zone) + '\'s half to be consumed') : null,
        el('li', { class: 'muted' }, 'Started by ' + text(d.started_by) + ': “' + text(d.reason) + '”')),
      // replaceChildren would write a null as the text "null": nothing is ''.
      d.hold_reason ? el('p', { class: 'hold' + (held ? ' held' : ''), id: 'drain-hold' }, (held ? 'held: ' : 'Held: ') + holdText(d.hold_reason)) : '');
    if (CAN_CHANGE) {
      $('drain-actions').hidden = false;
      $('drain-start-link').hidden = true;
      $('drain-pause').disabled = d.state === 'paused';
      $('drain-resume').disabled = d.state !== 'paused';
      $('drain-rollback').disabled = d.state === 'rolling_back';
    }
  }

  // " in domain search": the domain a drain moves, named whenever the table has several (or the
  // drain's is not the default one).
  function drainDomain(d) {
    const name = d.domain || DEFAULT_DOMAIN;
    return manyDomains(view.routing) || name !== DEFAULT_DOMAIN ? ' in ' + domainWords(name) : '';
  }

  // A loss-less drain's phase: which units are frozen and what the step waits for, and the
  // last step's freeze window next to how long the freeze took to reach every subscriber.
  function freezeFact(f) {
    if (!f || !f.enabled) return null;
    const c = f.current;
    const last = (f.finished || [])[f.finished.length - 1];
    let phase;
    if (c && c.phase === 'freezing') {
      phase = 'Freezing units ' + text(c.units) + ': writes of their users wait until every subscriber applied version ' + text(c.frozen_version);
    } else if (c) {
      phase = 'Switched units ' + text(c.units) + ' (version ' + text(c.switched_version) + '); still frozen until every subscriber applied it';
    } else {
      phase = 'Loss-less steps: freeze → switch → unfreeze (window ' + text(f.window_ms) + ' ms)';
    }
    const lastText = last ? ' · last step: frozen ' + text(last.window_ms) + ' ms, applied everywhere after ' + (last.switch_after_ms === null ? '– (not switched)' : text(last.switch_after_ms) + ' ms') : '';
    return el('li', { id: 'drain-freeze', 'data-phase': c ? c.phase : 'none' }, phase + lastText);
  }

  function wireDrainActions() {
    clearOnInput('drain-reason', 'drain-error');
    for (const id of ['drain-pause', 'drain-resume', 'drain-abort', 'drain-rollback']) {
      $(id).addEventListener('click', async (event) => {
        const button = event.currentTarget;
        const action = button.dataset.action;
        const active = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state));
        show($('drain-error'), '');
        show($('drain-flash'), '');
        if (!active) return;
        const reasonInput = $('drain-reason');
        const reason = reasonInput.value.trim();
        if (!reason) {
          reasonInput.setAttribute('aria-invalid', 'true');
          show($('drain-error'), 'Give a reason for the ' + button.textContent.toLowerCase() + ': it goes into the audit log with your name.');
          reasonInput.focus();
          return;
        }
        reasonInput.removeAttribute('aria-invalid');
        button.disabled = true;
        try {
          const d = await api('POST', '/v1/drains/' + active.id + '/' + action, { reason });
          reasonInput.value = '';
          show($('drain-flash'), drainKind(d) + ' ' + d.id + ' is now ' + d.state.replace('_', ' ') + '.');
        } catch (err) {
          show($('drain-error'), explain(err));
        } finally {
          button.disabled = false;
          await poll(true);
        }
      });
    }
  }

  // ---- typed confirmation ------------------------------------------------------------------

  // A typed confirmation, for a plan's run or drill and for a unit move: the go button stays
  // disabled until the field holds exactly the expected name (the field never capitalises or
  // corrects it), Enter in the field or the extra ones sends, and one in flight blocks another.
  function typedConfirm(o) {
    const update = () => {
      const expected = o.expected();
      $(o.go).disabled = !expected || o.busy() || $(o.field).value !== expected;
    };
    $(o.field).addEventListener('input', () => { show($(o.error), ''); update(); });
    for (const id of [o.field, ...(o.enter || [])]) {
      $(id).addEventListener('keydown', (event) => {
        if (event.key === 'Enter') { event.preventDefault(); o.send(); }
      });
    }
    $(o.go).addEventListener('click', o.send);
    $(o.cancel).addEventListener('click', o.close);
    return { update, matches: () => !!o.expected() && $(o.field).value === o.expected() };
  }

  // ---- release channels ------------------------------------------------------------------

  // "New channel" / "Edit <name>": PUT /v1/channels/{name} with dry_run first (the resolved
  // channel, each receiving zone's projected load, whether tidegate would refuse it), then the
  // channel's name typed to confirm, then the put at the previewed version. "Delete…" on a row:
  // a reason and the name typed, then DELETE at the version the page shows. A new channel goes
  // into the domain the page shows; an edited one stays in its own.
  const channelView = {
    editing: null, // the channel being edited (its GET /v1/routing row), or null for a new one
    confirm: null, // {name, body, version} while the preview and confirmation are open
    deleting: null, // {name, version} while the delete confirmation is open
    reviewing: false,
    sending: false,
    zones: null,
    typed: null,
    typedDelete: null,
  };

  function syncChannelZones(r) {
    const select = $('ch-zone');
    if (!select) return;
    const live = liveZones(r);
    const key = live.map((z) => z.name + '/' + z.lane).join(',');
    if (key === channelView.zones) return;
    channelView.zones = key;
    const chosen = select.value;
    select.replaceChildren(...live.map((z) => el('option', { value: z.name }, z.name + ' (' + z.lane + ')')));
    if (live.some((z) => z.name === chosen)) select.value = chosen;
  }

  const CHANNEL_FIELDS = {
    name: 'ch-name', services: 'ch-services', zone: 'ch-zone', domain: 'ch-name', percent: 'ch-percent', units: 'ch-units',
    users: 'ch-users', fallback: 'ch-fallback', expires_in: 'ch-expires', expires_at_ms: 'ch-expires',
  };

  // An API refusal with its detail; the field it names (`services: …`) is marked.
  function channelRefusal(err) {
    if (!(err instanceof ApiError) || err.status < 400 || err.status === 401 || err.status === 403) return explain(err);
    const detail = String(err.detail || '');
    const field = detail.split(/[:[ ]/, 1)[0];
    if (CHANNEL_FIELDS[field]) $(CHANNEL_FIELDS[field]).setAttribute('aria-invalid', 'true');
    if (/`percent` or by `units`/.test(detail)) $('ch-percent').setAttribute('aria-invalid', 'true');
    return err.code + ': ' + detail + (detail.endsWith('.') ? '' : '.');
  }

  function list(value) { return value.split(/[\s,]+/).map((v) => v.trim()).filter(Boolean); }

  // The request body the form describes (without version and reason), or an error sentence.
  function channelBody() {
    const name = $('ch-name').value.trim();
    const services = list($('ch-services').value);
    const percent = $('ch-percent').value.trim();
    const units = $('ch-units').value.trim();
    const users = list($('ch-users').value);
    if (!name) return { error: 'Name the channel.', field: 'ch-name' };
    if (!services.length) return { error: 'Name the services whose calls it routes.', field: 'ch-services' };
    if (!percent && !units && !users.length) return { error: 'Say which users it selects: a share, units, or named users.', field: 'ch-percent' };
    const body = { services, zone: $('ch-zone').value, users, fallback: $('ch-fallback').value };
    if (percent) body.percent = Number(percent);
    if (units) body.units = units;
    const expires = $('ch-expires').value.trim();
    if (expires) body.expires_in = expires;
    if ($('ch-freeze').checked) body.freeze = true;
    const domain = channelView.editing ? channelView.editing.domain : domainView.selected;
    if (domain && domain !== DEFAULT_DOMAIN) body.domain = domain;
    return { name, body };
  }

  function closeChannelConfirm() {
    channelView.confirm = null;
    $('ch-confirm').hidden = true;
    $('ch-review').disabled = channelView.reviewing;
    show($('ch-confirm-error'), '');
    $('ch-confirm-name').value = '';
  }

  function clearChannelForm() {
    channelView.editing = null;
    closeChannelConfirm();
    for (const id of ['ch-name', 'ch-services', 'ch-percent', 'ch-units', 'ch-users', 'ch-expires', 'ch-reason']) {
      $(id).value = '';
      $(id).removeAttribute('aria-invalid');
    }
    $('ch-fallback').value = 'global';
    $('ch-freeze').checked = false;
    $('ch-name').readOnly = false;
    $('ch-clear').hidden = true;
    $('channel-form-title').textContent = 'New channel';
    show($('ch-error'), '');
  }

  // Fills the form with a channel: its share, its named users, and the time left to its expiry
  // (rounded up to the minute). A share puts the same units back (they are chosen in an order
  // fixed by the name); a channel made of explicit units shows them in the preview's "replaces"
  // line, so the operator sees if the share would pick others.
  function editChannel(name) {
    const c = ((view.routing && view.routing.channels) || []).find((ch) => ch.name === name);
    if (!c) return;
    clearChannelForm();
    channelView.editing = c;
    $('ch-name').value = c.name;
    $('ch-name').readOnly = true;
    $('ch-services').value = (c.services || []).join(', ');
    syncChannelZones(view.routing);
    $('ch-zone').value = c.zone;
    if (c.units) $('ch-percent').value = Number(c.share_percent);
    $('ch-users').value = (c.users || []).join(', ');
    $('ch-fallback').value = c.fallback || 'global';
    const left = c.expires_at_ms ? c.expires_at_ms - serverNow() : 0;
    $('ch-expires').value = left > 0 ? Math.ceil(left / 60000) + 'm' : '';
    $('channel-form-title').textContent = 'Edit ' + c.name + (c.domain && c.domain !== DEFAULT_DOMAIN ? ' (domain ' + c.domain + ')' : '');
    $('ch-clear').hidden = false;
    $('ch-reason').focus();
    $('channel-form').scrollIntoView({ block: 'nearest' });
  }

  async function reviewChannel() {
    show($('ch-ok'), '');
    show($('ch-error'), '');
    const r = view.routing;
    if (!r || channelView.reviewing || channelView.sending) return;
    const made = channelBody();
    if (made.error) {
      $(made.field).setAttribute('aria-invalid', 'true');
      show($('ch-error'), made.error);
      $(made.field).focus();
      return;
    }
    const reason = $('ch-reason').value.trim();
    if (!reason) {
      $('ch-reason').setAttribute('aria-invalid', 'true');
      show($('ch-error'), 'Give a reason: it goes into the audit log with your name.');
      $('ch-reason').focus();
      return;
    }
    closeChannelConfirm();
    const version = r.version;
    const body = Object.assign({}, made.body, { expected_version: version, reason });
    channelView.reviewing = true;
    $('ch-review').disabled = true;
    let dry;
    try {
      dry = await api('PUT', '/v1/channels/' + encodeURIComponent(made.name), Object.assign({ dry_run: true }, body));
    } catch (err) {
      show($('ch-error'), 'The dry run was refused: ' + channelRefusal(err));
      return;
    } finally {
      channelView.reviewing = false;
      $('ch-review').disabled = false;
    }
    channelView.confirm = { name: made.name, body, version };
    renderChannelPreview(dry, made.name);
    $('ch-confirm-title').textContent = (channelView.editing ? 'Confirm the change of ' : 'Confirm the new channel ') + made.name;
    $('ch-confirm-expected').textContent = made.name;
    $('ch-confirm').hidden = false;
    $('ch-review').disabled = true;
    channelView.typed.update();
    $('ch-confirm-name').focus();
  }

  // The dry run: what the channel will select and where, what it replaces, each receiving
  // zone's projected load, and whether tidegate would refuse it now.
  function renderChannelPreview(dry, name) {
    const c = dry.channel || {};
    const users = (c.users || []).length;
    const who = [c.units ? pct(c.share_percent) + ' of users (units ' + c.units + ')' : '', users ? users + ' named user' + (users === 1 ? '' : 's') : ''].filter(Boolean).join(' and ');
    const was = channelView.editing;
    const parts = [
      el('p', { class: 'summary', id: 'ch-preview-summary' },
        el('strong', {}, name), ' will send the ', text((c.services || []).join(', ')), ' calls of ', el('strong', { id: 'ch-preview-who' }, who),
        ' to ', el('strong', {}, text(c.zone) + ' (' + text(c.lane) + ')'), ' in domain ' + text(c.domain) + '; while suspended its users ' +
        (c.fallback === 'reject' ? 'are refused' : 'follow the map') + '; ' +
        (c.expires_at_ms ? 'it expires at ' + new Date(c.expires_at_ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC.' : 'it does not expire.')),
    ];
    if (was) {
      parts.push(el('p', { class: 'hint', id: 'ch-preview-was' }, 'It replaces: ' + pct(was.share_percent) + ' of users' +
        (was.units ? ' (units ' + was.units + ')' : '') + ' to ' + was.zone + '. A share only grows or shrinks at its edge: users in both stay.'));
    }
    const rows = (dry.projection || []).map((p) => el('tr', { 'data-zone': text(p.zone) }, el('td', {}, text(p.zone)),
      capacityCell({ zone: p.zone, verdict: p.verdict, projected_rps: p.projected_rps, allowed_rps: p.allowed_rps, detail: p.explain })));
    if (rows.length) {
      parts.push(el('div', { class: 'table-wrap' }, stacked(el('table', { id: 'ch-preview-zones' },
        el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Receiving zone'), el('th', { scope: 'col' }, 'Projected load vs capacity'))),
        el('tbody', {}, rows)))));
    }
    if (dry.freeze) {
      const f = dry.freeze;
      parts.push(el('p', { class: 'hint', id: 'ch-preview-freeze' }, 'Loss-less: the writes of ' + (f.services || []).join(', ') +
        ' by users of ' + (f.units ? 'units ' + f.units : 'no unit') + ((f.users || []).length ? ' and ' + f.users.length + ' listed user(s)' : '') +
        ' wait (503, retry) from the freeze until every live subscriber has the switch; reads go on.'));
    }
    const refuse = dry.would_refuse;
    parts.push(refuse
      ? el('p', { class: 'warning', id: 'ch-preview-refuse', role: 'alert' }, 'tidegate would refuse this channel now: ' + refuse +
        (refuse.endsWith('.') ? '' : '.') + ' Confirming sends it anyway and shows the refusal; select fewer users or choose another zone.')
      : el('p', { class: 'ok', id: 'ch-preview-fits' }, '✓ tidegate would put this channel now.'));
    $('ch-preview').replaceChildren(...parts);
  }

  async function applyChannel() {
    const c = channelView.confirm;
    if (!c || channelView.sending || !channelView.typed.matches()) return;
    channelView.sending = true;
    channelView.typed.update();
    show($('ch-confirm-error'), '');
    try {
      const result = await api('PUT', '/v1/channels/' + encodeURIComponent(c.name), c.body);
      clearChannelForm();
      show($('ch-ok'), !result.changed
        ? 'Nothing changed: channel ' + c.name + ' was already so.'
        : result.change
          ? 'Freezing: channel ' + c.name + '’s moving writes are frozen (routing version ' + result.version + '); it switches once every live subscriber has the freeze.'
          : 'Done: channel ' + c.name + ' put (routing version ' + result.version + ').');
      await poll(true);
    } catch (err) {
      if (err.code === 'version_conflict') {
        closeChannelConfirm();
        await poll(true);
        show($('ch-error'), 'Not applied: someone else changed the routing while you were deciding (you previewed version ' + c.version +
          '; it is now version ' + (err.body.current_version || (view.routing && view.routing.version)) + '). Preview the channel again.');
      } else {
        show($('ch-confirm-error'), 'Not applied: ' + channelRefusal(err));
      }
    } finally {
      channelView.sending = false;
      if (channelView.confirm) channelView.typed.update();
    }
  }

  function closeChannelDelete() {
    channelView.deleting = null;
    $('ch-delete').hidden = true;
    $('ch-delete-name').value = '';
    $('ch-delete-reason').value = '';
    $('ch-delete-freeze').checked = false;
    show($('ch-delete-error'), '');
  }

  function askDeleteChannel(name) {
    const c = ((view.routing && view.routing.channels) || []).find((ch) => ch.name === name);
    if (!c) return;
    closeChannelDelete();
    channelView.deleting = { name, version: view.routing.version };
    $('ch-delete-title').textContent = 'Delete the channel ' + name;
    $('ch-delete-summary').textContent = 'Its users’ ' + (c.services || []).join(', ') + ' calls go back to the map (' +
      pct(c.share_percent) + ' of users now sent to ' + c.zone + ' by it), in one routing version.';
    $('ch-delete-expected').textContent = name;
    $('ch-delete').hidden = false;
    channelView.typedDelete.update();
    $('ch-delete-reason').focus();
  }

  async function applyDeleteChannel() {
    const d = channelView.deleting;
    if (!d || channelView.sending || !channelView.typedDelete.matches()) return;
    const reason = $('ch-delete-reason').value.trim();
    if (!reason) {
      $('ch-delete-reason').setAttribute('aria-invalid', 'true');
      show($('ch-delete-error'), 'Give a reason: it goes into the audit log with your name.');
      return;
    }
    channelView.sending = true;
    channelView.typedDelete.update();
    try {
      const body = { expected_version: d.version, reason };
      if ($('ch-delete-freeze').checked) body.freeze = true;
      const result = await api('DELETE', '/v1/channels/' + encodeURIComponent(d.name), body);
      closeChannelDelete();
      if (channelView.editing && channelView.editing.name === d.name) clearChannelForm();
      show($('ch-ok'), result.change
        ? 'Freezing: channel ' + d.name + '’s users’ writes are frozen (routing version ' + result.version + '); it is deleted once every live subscriber has the freeze.'
        : 'Done: channel ' + d.name + ' deleted (routing version ' + result.version + ').');
      await poll(true);
    } catch (err) {
      if (err.code === 'version_conflict') {
        closeChannelDelete();
        await poll(true);
        show($('ch-error'), 'Not deleted: someone else changed the routing while you were deciding. Look at the channel again.');
      } else {
        show($('ch-delete-error'), 'Not deleted: ' + explain(err));
      }
    } finally {
      channelView.sending = false;
      if (channelView.deleting) channelView.typedDelete.update();
    }
  }

  function wireChannels() {
    if (!$('channel-form')) return;
    $('channel-form').addEventListener('submit', (event) => {
      event.preventDefault();
      reviewChannel();
    });
    // A preview is for what it was made with: editing any field closes it.
    for (const id of ['ch-name', 'ch-services', 'ch-zone', 'ch-percent', 'ch-units', 'ch-users', 'ch-fallback', 'ch-expires', 'ch-freeze']) {
      $(id).addEventListener(['ch-zone', 'ch-fallback', 'ch-freeze'].includes(id) ? 'change' : 'input', () => {
        $(id).removeAttribute('aria-invalid');
        if (id === 'ch-percent' || id === 'ch-units') for (const f of ['ch-percent', 'ch-units']) $(f).removeAttribute('aria-invalid');
        show($('ch-error'), '');
        if (channelView.confirm) closeChannelConfirm();
      });
    }
    clearOnInput('ch-reason', 'ch-error');
    $('ch-clear').addEventListener('click', clearChannelForm);
    channelView.typed = typedConfirm({
      field: 'ch-confirm-name', go: 'ch-confirm-go', error: 'ch-confirm-error', cancel: 'ch-confirm-cancel',
      expected: () => channelView.confirm && channelView.confirm.name,
      busy: () => channelView.sending,
      send: applyChannel,
      close: closeChannelConfirm,
    });
    channelView.typedDelete = typedConfirm({
      field: 'ch-delete-name', go: 'ch-delete-go', error: 'ch-delete-error', cancel: 'ch-delete-cancel',
      expected: () => channelView.deleting && channelView.deleting.name,
      busy: () => channelView.sending,
      send: applyDeleteChannel,
      close: closeChannelDelete,
    });
    clearOnInput('ch-delete-reason', 'ch-delete-error');
    $('channels').addEventListener('click', (event) => {
      const edit = event.target.closest('button[data-edit-channel]');
      if (edit) editChannel(edit.dataset.editChannel);
      const del = event.target.closest('button[data-delete-channel]');
      if (del) askDeleteChannel(del.dataset.deleteChannel);
    });
  }

  // ---- moving units ------------------------------------------------------------------------

  // "Move units": unit ranges, a receiving zone and a reason; PUT /v1/units with dry_run first
  // (moved units, each receiver's projected load against its capacity, whether tidegate would
  // refuse it), then the zone's name typed to confirm, then the move at the previewed version.
  const unitsView = {
    confirm: null, // {moves, zone, version, dry} while the preview and confirmation are open
    reviewing: false, // a dry run is on its way
    sending: false, // the move is on its way: Enter again must not send a second one
    zones: null, // the live zones the select lists, so a poll rebuilds it only when they change
    typed: null,
  };

  // The receiving zones: every live zone, rebuilt when a zone is added or retired.
  function syncUnitZones(r) {
    const select = $('units-zone');
    if (!select) return;
    const live = liveZones(r);
    const key = live.map((z) => z.name + '/' + z.lane).join(',');
    if (key === unitsView.zones) return;
    unitsView.zones = key;
    const chosen = select.value;
    select.replaceChildren(...live.map((z) => el('option', { value: z.name }, z.name + ' (' + z.lane + ')')));
    if (live.some((z) => z.name === chosen)) select.value = chosen;
  }

  // An API refusal with its detail; a bad field is marked next to its input. The API names its
  // fields (`moves[0].units: unit 100 is outside …`): the form has one move, so those are the
  // Units and Receiving zone inputs.
  function unitsRefusal(err) {
    if (!(err instanceof ApiError) || err.status < 400 || err.status === 401 || err.status === 403) return explain(err);
    const detail = String(err.detail || '');
    if (detail.startsWith('moves[0].units')) $('units-ranges').setAttribute('aria-invalid', 'true');
    if (detail.startsWith('moves[0].zone')) $('units-zone').setAttribute('aria-invalid', 'true');
    return err.code + ': ' + detail + (detail.endsWith('.') ? '' : '.');
  }

  function closeUnitsConfirm() {
    unitsView.confirm = null;
    $('units-confirm').hidden = true;
    $('units-review').disabled = unitsView.reviewing;
    show($('units-stale'), '');
    show($('units-confirm-error'), '');
    $('units-confirm-name').value = '';
  }

  function unitsReason() {
    const reason = $('units-reason').value.trim();
    if (reason) {
      $('units-reason').removeAttribute('aria-invalid');
      return reason;
    }
    $('units-reason').setAttribute('aria-invalid', 'true');
    return null;
  }

  async function reviewUnits() {
    show($('units-ok'), '');
    show($('units-error'), '');
    const r = view.routing;
    if (!r || unitsView.reviewing || unitsView.sending) return;
    const ranges = $('units-ranges').value.trim();
    const zone = $('units-zone').value;
    if (!ranges) {
      $('units-ranges').setAttribute('aria-invalid', 'true');
      show($('units-error'), 'Enter the units to move: ranges and single units of 0–' + (r.units - 1) + ', such as 25-49,60.');
      $('units-ranges').focus();
      return;
    }
    if (!zone) {
      show($('units-error'), 'Choose the zone that receives the units.');
      return;
    }
    const reason = unitsReason();
    if (!reason) {
      show($('units-error'), 'Give a reason: it goes into the audit log with your name.');
      $('units-reason').focus();
      return;
    }
    closeUnitsConfirm();
    const domain = domainView.selected;
    const many = manyDomains(r);
    const move = { units: ranges, zone };
    if (domain !== DEFAULT_DOMAIN) move.domain = domain;
    const moves = [move];
    const version = r.version;
    unitsView.reviewing = true;
    $('units-review').disabled = true;
    let dry;
    try {
      dry = await api('PUT', '/v1/units', { moves, expected_version: version, reason, dry_run: true });
    } catch (err) {
      show($('units-error'), 'The dry run was refused: ' + unitsRefusal(err));
      return;
    } finally {
      unitsView.reviewing = false;
      $('units-review').disabled = false;
    }
    if (!dry.moved_units) {
      show($('units-error'), 'Nothing would change: ' + ranges + ' already belong to ' + zone + (many ? ' in ' + domainWords(domain) : '') + '.');
      return;
    }
    unitsView.confirm = { moves, zone, version, dry, domain, many };
    renderUnitsPreview(dry, r, zone, domain);
    $('units-confirm-title').textContent = 'Confirm: move ' + count(dry.moved_units) + (dry.moved_units === 1 ? ' unit' : ' units') +
      (many ? ' of ' + domainWords(domain) : '') + ' to ' + zone;
    $('units-confirm-expected').textContent = zone;
    $('units-confirm-go').textContent = many ? 'Move ' + domain + '’s units to ' + zone : 'Move them to ' + zone;
    $('units-confirm').hidden = false;
    $('units-review').disabled = true;
    unitsView.typed.update();
    $('units-confirm-name').focus();
  }

  // The dry run: who gains and who loses units, the capacity verdict of each zone that gains
  // (the plans page's cell), and whether tidegate would refuse the move now.
  function renderUnitsPreview(dry, r, zone, domain) {
    const many = manyDomains(r);
    const before = domainTable(r, domain).counts;
    const after = unitCounts(domain === DEFAULT_DOMAIN ? dry.unit_map : ((dry.domains || {})[domain] || {}).unit_map);
    const projection = {};
    for (const p of dry.projection || []) {
      projection[p.zone] = { zone: p.zone, verdict: p.verdict, projected_rps: p.projected_rps, allowed_rps: p.allowed_rps, detail: p.explain };
    }
    const rows = tableZones(r).filter((z) => !z.retired || before[z.name] || after[z.name]).map((z) => {
      const now = before[z.name] || 0;
      const next = after[z.name] || 0;
      const change = next - now;
      return el('tr', { 'data-zone': z.name, class: change ? 'changes' : '' },
        el('td', {}, el('strong', {}, z.name), ' ', el('span', { class: 'chip chip-' + laneClass(z.index, z.lane) }, z.lane)),
        el('td', { class: 'num' }, count(now)),
        el('td', { class: 'num units-after' }, count(next)),
        el('td', { class: 'num units-change' }, change > 0 ? '+' + change : change < 0 ? '−' + -change : '0'),
        change > 0 ? capacityCell(projection[z.name]) : el('td', { class: 'muted' }, '–'));
    });
    const share = dry.moved_units * 100 / r.units;
    const refuse = dry.would_refuse;
    $('units-preview').replaceChildren(
      el('p', { class: 'summary', id: 'units-preview-summary' },
        el('strong', { id: 'units-preview-moved' }, count(dry.moved_units) + (dry.moved_units === 1 ? ' unit' : ' units')),
        ' (' + pct(share) + ' of ' + (many ? domain + '’s ' : '') + 'users) will move to ' + zone + (many ? ' in ' + domainWords(domain) : '') + ' in one routing version: ',
        (dry.moves || []).flatMap((m) => m.units.split(',')).flatMap((set, i) => [i ? ', ' : '', el('span', { class: 'unit-set' }, set)]),
        '. Units already in ' + zone + ' stay; no other unit changes owner.' + (many ? othersStay(r, domain) : '')),
      el('div', { class: 'table-wrap' }, stacked(el('table', { id: 'units-preview-zones' },
        el('thead', {}, el('tr', {},
          el('th', { scope: 'col' }, 'Zone'),
          el('th', { scope: 'col', class: 'num' }, 'Units now' + (many ? ' (' + domain + ')' : '')),
          el('th', { scope: 'col', class: 'num' }, 'Units after' + (many ? ' (' + domain + ')' : '')),
          el('th', { scope: 'col', class: 'num' }, 'Change'),
          el('th', { scope: 'col' }, 'Projected load vs capacity'))),
        el('tbody', {}, rows)))),
      refuse
        ? el('p', { class: 'warning', id: 'units-preview-refuse', role: 'alert' }, 'tidegate would refuse this move now: ' + refuse +
          (refuse.endsWith('.') ? '' : '.') + ' Confirming sends it anyway and shows the refusal; move fewer units or choose another zone.')
        : el('p', { class: 'ok', id: 'units-preview-fits' }, '✓ tidegate would make this move now.'));
  }

  async function applyUnits() {
    const c = unitsView.confirm;
    if (!c || unitsView.sending || !unitsView.typed.matches()) return;
    const reason = unitsReason();
    if (!reason) {
      show($('units-confirm-error'), 'Give a reason in the form above: it goes into the audit log with your name.');
      return;
    }
    unitsView.sending = true;
    unitsView.typed.update();
    show($('units-confirm-error'), '');
    try {
      const body = { moves: c.moves, expected_version: c.version, reason };
      body.freeze = $('units-freeze').checked;
      const result = await api('PUT', '/v1/units', body);
      closeUnitsConfirm();
      $('units-ranges').value = '';
      $('units-reason').value = '';
      $('units-freeze').checked = FREEZE_DEFAULT;
      show($('units-ok'), result.change
        ? 'Freezing: units ' + frozenWords(result.change.frozen) + ' are frozen (routing version ' + result.version + '); they move to ' + c.zone +
          ' once every live subscriber has the freeze.'
        : 'Done: ' + count(result.moved_units) + (result.moved_units === 1 ? ' unit' : ' units') + (c.many ? ' of ' + domainWords(c.domain) : '') +
          ' moved to ' + c.zone + ' (routing version ' + result.version + ').');
      await poll(true);
    } catch (err) {
      if (err.code === 'version_conflict') {
        // Never retry at the new version behind the operator's back: the units may have moved.
        closeUnitsConfirm();
        await poll(true);
        show($('units-error'), 'Not applied: someone else changed the routing while you were deciding (you previewed version ' + c.version +
          '; it is now version ' + (err.body.current_version || (view.routing && view.routing.version)) + '). Preview the move again.');
      } else {
        show($('units-confirm-error'), 'Not applied: ' + unitsRefusal(err));
      }
    } finally {
      unitsView.sending = false;
      if (unitsView.confirm) unitsView.typed.update();
    }
  }

  function wireUnits() {
    $('units-form').addEventListener('submit', (event) => {
      event.preventDefault();
      reviewUnits();
    });
    // A preview is for the units, zone and reason it was made with: editing the units or the zone
    // closes it.
    for (const id of ['units-ranges', 'units-zone']) {
      $(id).addEventListener(id === 'units-zone' ? 'change' : 'input', () => {
        $(id).removeAttribute('aria-invalid');
        show($('units-error'), '');
        if (unitsView.confirm) closeUnitsConfirm();
      });
    }
    clearOnInput('units-reason', 'units-error');
    unitsView.typed = typedConfirm({
      field: 'units-confirm-name', go: 'units-confirm-go', error: 'units-confirm-error', cancel: 'units-confirm-cancel',
      expected: () => unitsView.confirm && unitsView.confirm.zone,
      busy: () => unitsView.sending,
      send: applyUnits,
      close: closeUnitsConfirm,
    });
    // A zone card's "Move <zone>'s units…" fills the form with the zone's units.
    $('zones').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-move-from]');
      if (!button) return;
      const from = button.dataset.moveFrom;
      $('units-ranges').value = unitsOf(selectedTable(view.routing).unit_map, from);
      const other = liveZones(view.routing).find((z) => z.name !== from);
      if (other && $('units-zone').value === from) $('units-zone').value = other.name;
      if (unitsView.confirm) closeUnitsConfirm();
      show($('units-ok'), '');
      show($('units-error'), '');
      $('units-card').scrollIntoView({ block: 'start' });
      $('units-zone').focus();
    });
  }

  // ---- polling ---------------------------------------------------------------------------

  let timer = null;
  let refresh = refreshOverview; // the open page's reader; the lanes page swaps in its own
  let refreshFailed = () => {};
  async function poll(once) {
    if (stopped) return;
    clearTimeout(timer);
    try {
      await refresh();
      setLive(true);
    } catch (err) {
      setLive(false, err);
      refreshFailed(err);
    }
    if (!stopped) timer = setTimeout(() => poll(false), POLL_MS);
    return once;
  }

  function startOverview() {
    wireDomain();
    if (CAN_CHANGE) {
      wireDial();
      wireDrainActions();
      wireRestore();
      wireUnits();
      wireChannels();
    }
    const q = new URLSearchParams(location.search);
    const started = q.get('started');
    if (started) {
      show($('drain-flash'), (q.get('kind') === 'evacuation' ? 'Evacuation ' : 'Drain ') + started + ' started' +
        (q.get('domain') ? ' in ' + domainWords(q.get('domain')) : '') + '.');
    }
    poll(false);
  }

  // ---- MQ lanes ----------------------------------------------------------------------------

  // The zone states of GET /v1/lanes, as a word, a symbol and a colour, like the overview's.
  const LANE_STATE = {
    serving: { text: '✓ Serving', css: 'state-active' },
    drained: { text: '↘ Drained, emptying', css: 'state-draining' },
    drained_empty: { text: '○ Drained and empty', css: 'state-drained' },
    down: { text: '✕ Down', css: 'state-down' },
  };

  const lanesView = {
    loaded: false,
    // Which groups' partition tables the operator opened or closed: the table is rebuilt on
    // every poll, and it must not snap back under their cursor.
    open: new Map(),
  };

  // [0, 1, 2, 3, 6] -> "0–3, 6"
  function ranges(list) {
    if (!list || !list.length) return 'none';
    const sorted = [...list].sort((a, b) => a - b);
    const out = [];
    let start = sorted[0];
    let prev = sorted[0];
    for (const p of sorted.slice(1).concat([null])) {
      if (p === prev + 1) { prev = p; continue; }
      out.push(start === prev ? String(start) : start + '–' + prev);
      start = prev = p;
    }
    return out.join(', ');
  }

  function messages(n) { return count(n) + (n === 1 ? ' message' : ' messages'); }

  function ago(iso) {
    const seconds = Math.max(0, Math.round((serverNow() - Date.parse(iso)) / 1000));
    return seconds < 120 ? seconds + ' s ago' : Math.round(seconds / 60) + ' min ago';
  }

  // Whether the group's lag is known now, and if not, why. A reading is kept after a failed
  // read, but it is no longer the lag: it is shown only as "last known", never as the value.
  function lagStatus(group, readsLag) {
    if (group.lag && !group.lag_error) return { known: true };
    let why;
    if (!readsLag) why = 'tidegate does not read lag, because lanes.kafka_bootstrap is not set';
    else if (group.lag_error) why = 'the last read from Kafka failed: ' + group.lag_error;
    else why = 'no reading from Kafka yet';
    return { known: false, why, last: group.lag };
  }

  function halfLag(zone, lag) {
    if (lag.known) return el('dd', { class: 'half-lag' }, messages(zone.lag));
    return el('dd', { class: 'half-lag muted' }, 'unknown',
      lag.last ? el('span', { class: 'hint' }, ' (last known ' + count(zone.lag) + ' at ' + clock(lag.last.at) + ')') : null);
  }

  function halfHint(group, zone) {
    const other = group.zones.find((z) => z.zone !== zone.zone);
    const otherZone = other ? other.zone : 'the other zone';
    switch (zone.state) {
      case 'down': return 'No live consumer in ' + zone.zone + ': ' + otherZone + '’s consumers read this half.';
      case 'drained': return zone.zone + '’s share is 0. Its consumers keep this half until a lag reading taken since then shows it empty.';
      case 'drained_empty': return zone.zone + '’s share is 0 and this half is empty: ' + otherZone + '’s consumers read it.';
      default: return null;
    }
  }

  function memberTable(members) {
    const heartbeat = Number($('lanes').dataset.heartbeatMs) || 1000;
    const rows = members.map((m) => {
      // Two missed heartbeats: worth a look before the session timeout drops it.
      const late = serverNow() - Date.parse(m.last_seen_at) > 3 * heartbeat;
      const releasing = (m.holding || []).filter((p) => !(m.assignment || []).includes(p));
      return el('tr', { 'data-member': m.member_id },
        el('th', { scope: 'row', class: 'nowrap' }, el('code', {}, m.member_id)),
        el('td', { class: 'member-assigned' }, ranges(m.assignment)),
        el('td', { class: 'member-holding' }, ranges(m.holding),
          releasing.length ? el('span', { class: 'hint' }, ' (releasing ' + ranges(releasing) + ')') : null),
        el('td', { class: 'member-pending' }, ranges(m.pending)),
        el('td', { class: 'nowrap', title: 'registered ' + clock(m.registered_at) },
          clock(m.last_seen_at) + ' · ' + ago(m.last_seen_at),
          late ? el('span', { class: 'badge state-draining late' }, '⚠ late') : null));
    });
    return el('div', { class: 'table-wrap' },
      el('table', { class: 'members' },
        el('thead', {}, el('tr', {},
          el('th', { scope: 'col' }, 'Member'),
          el('th', { scope: 'col', title: 'the partitions it may read now' }, 'Assigned'),
          el('th', { scope: 'col', title: 'what it said it still reads, in its last heartbeat' }, 'Holding'),
          el('th', { scope: 'col', title: 'partitions it gets once their previous reader has committed and released them' }, 'Pending'),
          el('th', { scope: 'col' }, 'Last heartbeat'))),
        el('tbody', {}, rows)));
  }

  function renderHalf(group, zone, lag) {
    const state = LANE_STATE[zone.state] || { text: zone.state, css: 'state-unknown' };
    const members = group.members.filter((m) => m.zone === zone.zone);
    const hint = halfHint(group, zone);
    return el('section', { class: 'half half-' + zone.color, 'data-zone': zone.zone, 'data-color': zone.color },
      el('div', { class: 'zone-head' },
        el('h3', {}, zone.color === 'blue' ? 'Blue half' : 'Green half'),
        el('span', { class: 'badge ' + state.css, 'data-state': zone.state }, state.text)),
      el('dl', {},
        el('div', {}, el('dt', {}, 'Partitions'), el('dd', { class: 'half-partitions' }, ranges(zone.half))),
        el('div', {}, el('dt', {}, 'Zone'), el('dd', {}, zone.zone)),
        el('div', {}, el('dt', {}, 'Lag'), halfLag(zone, lag))),
      hint ? el('p', { class: 'hint half-hint' }, hint) : null,
      el('h4', {}, 'Consumers in ' + zone.zone + ' (' + members.length + ')'),
      members.length ? memberTable(members) : el('p', { class: 'muted' }, 'None registered.'));
  }

  // The partitions as a strip, blue half then green half, like the dial's split bar.
  function strip(group) {
    const mid = group.partitions / 2;
    const cells = [];
    for (let p = 0; p < group.partitions; p++) {
      cells.push(el('span', { class: 'cell cell-' + (p < mid ? 'blue' : 'green') }, group.partitions <= 32 ? String(p) : ''));
    }
    return el('div', { class: 'strip', 'aria-hidden': 'true' }, cells);
  }

  function partitionTable(group, lag) {
    const who = (field, p) => group.members.filter((m) => (m[field] || []).includes(p)).map((m) => m.member_id);
    const offsets = {};
    if (lag.known) for (const o of group.lag.partitions) offsets[o.partition] = o;
    const mid = group.partitions / 2;
    const rows = [];
    for (let p = 0; p < group.partitions; p++) {
      const readers = who('assignment', p);
      const next = who('pending', p);
      const held = who('holding', p).filter((id) => !readers.includes(id));
      const o = offsets[p];
      const color = p < mid ? 'blue' : 'green';
      rows.push(el('tr', { 'data-partition': p },
        el('td', { class: 'num' }, p),
        el('td', {}, el('span', { class: 'chip chip-' + color }, color)),
        el('td', { class: 'read-by' },
          readers.length ? readers.join(', ') : el('span', { class: 'muted' }, 'nobody'),
          held.length ? el('span', { class: 'hint' }, ' (' + held.join(', ') + ' still releasing it)') : null),
        el('td', {}, next.length ? next.join(', ') : '–'),
        el('td', { class: 'num' }, o ? (o.committed === null ? 'none yet' : count(o.committed)) : '–'),
        el('td', { class: 'num' }, o ? count(o.high) : '–'),
        el('td', { class: 'num partition-lag' + (o ? '' : ' muted') }, o ? count(o.lag) : 'unknown')));
    }
    const details = el('details', { class: 'partitions', 'data-group': group.group },
      el('summary', {}, 'Partitions: assignment and lag (' + group.partitions + ')'),
      el('div', { class: 'table-wrap' },
        el('table', {},
          el('thead', {}, el('tr', {},
            el('th', { scope: 'col', class: 'num' }, 'Partition'),
            el('th', { scope: 'col' }, 'Half'),
            el('th', { scope: 'col' }, 'Read by'),
            el('th', { scope: 'col' }, 'Pending for'),
            el('th', { scope: 'col', class: 'num' }, 'Committed'),
            el('th', { scope: 'col', class: 'num' }, 'High watermark'),
            el('th', { scope: 'col', class: 'num' }, 'Lag'))),
          el('tbody', {}, rows))));
    const remembered = lanesView.open.get(group.group);
    details.open = remembered === undefined ? group.partitions <= 32 : remembered;
    details.addEventListener('toggle', () => { lanesView.open.set(group.group, details.open); });
    return details;
  }

  function renderLaneGroup(group, readsLag) {
    const lag = lagStatus(group, readsLag);
    return el('article', { class: 'card lane-group', 'data-group': group.group },
      el('div', { class: 'zone-head' }, el('h2', {}, group.group)),
      el('p', { class: 'meta' },
        'Topic ', el('strong', { class: 'lane-topic' }, group.topic),
        ' · ', el('strong', { class: 'lane-partitions' }, group.partitions), ' partitions',
        ' · assignment generation ', el('strong', { class: 'lane-generation' }, group.generation),
        ' · routing version ', el('strong', {}, group.routing_version)),
      lag.known
        ? el('p', { class: 'meta lane-lag' }, 'Lag read from Kafka at ' + clock(group.lag.at) + '.')
        : el('p', { class: 'unknown lane-lag' }, '? Lag unknown: ' + lag.why + '.'),
      strip(group),
      el('div', { class: 'halves' }, group.zones.map((zone) => renderHalf(group, zone, lag))),
      partitionTable(group, lag));
  }

  async function refreshLanes() {
    const data = await api('GET', '/v1/lanes');
    const groups = data.groups || [];
    lanesView.loaded = true;
    if (!groups.length && data.authority) {
      // A replica of a shared log that is not the lane authority knows no members: say who does.
      const who = data.authority.id || 'another replica';
      const where = data.authority.url
        ? el('p', {}, el('a', { href: data.authority.url + '/ui/lanes', id: 'lanes-authority-link' }, 'Open the lanes page of ' + who))
        : el('p', { class: 'hint' }, 'No replica holds the lanes lease right now; one takes it within a lease term.');
      $('lanes').replaceChildren(el('section', { class: 'card empty', id: 'lanes-elsewhere' },
        el('h2', {}, 'Lane groups are kept by ' + who),
        el('p', {}, 'Lane membership is answered by one replica at a time, the lane authority (it holds the lanes lease in the command log). This replica is not it, so it lists no groups.'),
        where));
      return;
    }
    if (!groups.length) {
      $('lanes').replaceChildren(el('section', { class: 'card empty', id: 'lanes-empty' },
        el('h2', {}, 'No lane groups'),
        el('p', {}, 'Nothing is consuming a lane topic through tidegate right now. A group appears here when its first consumer registers (a LaneConsumer starting, or POST /v1/lanes/{group}/members) and goes away when its last consumer leaves or times out.'),
        el('p', { class: 'hint' }, 'Membership lives in memory: after tidegate restarts, groups come back as their consumers register again.')));
      return;
    }
    $('lanes').replaceChildren(...groups.map((g) => renderLaneGroup(g, data.reads_lag)));
  }

  function startLanes() {
    refresh = refreshLanes;
    // Before the first answer there is nothing to show but the reason. Afterwards the live line
    // says the values may be old, as on the overview.
    refreshFailed = (err) => {
      if (lanesView.loaded) return;
      $('lanes').replaceChildren(el('p', { class: 'error', id: 'lanes-error', role: 'alert' },
        'Could not read the lane groups: ' + explain(err)));
    };
    poll(false);
  }

  // ---- drain form ------------------------------------------------------------------------

  const FIELDS = {
    domain: ['f-domain', 'e-domain'],
    zone: ['f-zone', 'e-zone'],
    target_percent: ['f-target', 'e-target'],
    step_percent: ['f-step', 'e-step'],
    interval: ['f-interval', 'e-interval'],
    max_error_rate: ['f-max-error', 'e-max-error'],
    min_requests: ['f-min-requests', 'e-min-requests'],
    breaches: ['f-breaches', 'e-breaches'],
    reason: ['f-reason', 'e-reason'],
    to: ['f-to-0', 'e-to'],
  };

  function fieldError(name, text) {
    const [input, error] = FIELDS[name];
    if (text) $(input).setAttribute('aria-invalid', 'true');
    else $(input).removeAttribute('aria-invalid');
    show($(error), text || '');
  }

  function percentProblem(text, what, allowZero) {
    if (text === '') return 'Enter the ' + what + ', from ' + (allowZero ? '0' : trim(STEP)) + ' to 100 %.';
    const value = Number(text);
    if (!Number.isFinite(value) || value < 0 || value > 100) return 'The ' + what + ' must be between 0 and 100 %.';
    if (!allowZero && value === 0) return 'The ' + what + ' must move at least one unit (' + trim(STEP) + ' %).';
    const units = value / STEP;
    if (Math.abs(units - Math.round(units)) > 1e-6) return 'The ' + what + ' must be a whole number of units: a multiple of ' + trim(STEP) + ' %.';
    return null;
  }

  function readDrainForm() {
    const v = (id) => $(id).value.trim();
    const domainShown = !$('f-domain-field').hidden;
    const problems = {
      domain: !domainShown || v('f-domain') ? null : 'Choose the routing domain whose users the drain moves.',
      zone: v('f-zone') ? null : 'Choose the zone to drain.',
      target_percent: percentProblem(v('f-target'), 'target share', true),
      step_percent: percentProblem(v('f-step'), 'step', false),
      interval: /^\d+\s*(ms|s|m|h)$/.test(v('f-interval')) ? null : 'Write the interval with a unit, e.g. 30s, 2m or 500ms.',
      max_error_rate: (() => {
        const t = v('f-max-error');
        const n = Number(t);
        return t !== '' && Number.isFinite(n) && n >= 0 && n <= 100 ? null : 'The highest acceptable error rate is a percentage from 0 to 100.';
      })(),
      min_requests: /^\d+$/.test(v('f-min-requests')) ? null : 'The minimum number of requests is a whole number, 0 or more.',
      breaches: /^[1-9]\d*$/.test(v('f-breaches')) ? null : 'The number of failed checks is a whole number, 1 or more.',
      reason: v('f-reason') ? null : 'Give a reason: it goes into the audit log with your name.',
    };
    if (!problems.interval && /^\d+\s*ms$/.test(v('f-interval')) && parseInt(v('f-interval'), 10) < 10) problems.interval = 'The interval must be at least 10ms.';
    const request = {
      zone: v('f-zone'),
      mode: v('f-mode') || 'maintenance',
      target_percent: Number(v('f-target')),
      step_percent: Number(v('f-step')),
      interval: v('f-interval').replace(/\s+/g, ''),
      guard: {
        max_error_rate: Number(v('f-max-error')) / 100,
        min_requests: Number(v('f-min-requests')),
        breaches: Number(v('f-breaches')),
        on_breach: v('f-on-breach'),
      },
      reason: v('f-reason'),
    };
    if (v('f-domain') && v('f-domain') !== DEFAULT_DOMAIN) request.domain = v('f-domain');
    // Receiving zones (tables of three or more): the ticked ones other than the drained zone;
    // none ticked leaves `to` out, and the coordinator spreads over every other live zone.
    if (!$('f-to-field').hidden) {
      const to = [...document.querySelectorAll('#f-to-field input[name="to"]:checked')].map((i) => i.value);
      const receivers = to.filter((z) => z !== request.zone);
      problems.to = to.length && !receivers.length ? 'The zone being drained cannot receive its own users: tick another zone, or none for every other live zone.' : null;
      if (receivers.length) request.to = receivers;
    }
    return { problems, request };
  }

  // Which field an API error is about, from its code or the detail's leading field name.
  function fieldOf(err) {
    if ((err.detail || '').startsWith('to[')) return 'to';
    if (err.code === 'unknown_zone') return 'zone';
    if (err.code === 'unknown_domain') return 'domain';
    if (err.code === 'invalid_reason') return 'reason';
    const d = err.detail || '';
    if (d.startsWith('target_percent')) return 'target_percent';
    if (d.startsWith('step_percent')) return 'step_percent';
    if (d.startsWith('interval')) return 'interval';
    if (d.startsWith('guard.max_error_rate')) return 'max_error_rate';
    if (d.includes('breaches')) return 'breaches';
    return null;
  }

  function startDrainForm() {
    const form = $('drain-form');
    if (!form) return;
    for (const [input, error] of Object.values(FIELDS)) clearOnInput(input, error);
    // The button names the domain it starts the drain in, as the overview's selection did.
    const submit = $('drain-submit');
    $('f-domain').addEventListener('change', () => {
      const name = $('f-domain').value;
      submit.textContent = submit.dataset.label + (name ? ' in ' + domainWords(name) : '');
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      show($('drain-form-error'), '');
      const { problems, request } = readDrainForm();
      let first = null;
      for (const [name, problem] of Object.entries(problems)) {
        fieldError(name, problem);
        if (problem && !first) first = name;
      }
      if (first) {
        $(FIELDS[first][0]).focus();
        return;
      }
      $('drain-submit').disabled = true;
      try {
        const drain = await api('POST', '/v1/drains', request);
        const domain = drain.domain && drain.domain !== DEFAULT_DOMAIN ? '&domain=' + encodeURIComponent(drain.domain) : '';
        location.assign('/ui?started=' + encodeURIComponent(drain.id) + (drain.mode === 'evacuate' ? '&kind=evacuation' : '') + domain);
      } catch (err) {
        const field = fieldOf(err);
        if (field) {
          fieldError(field, explain(err));
          $(FIELDS[field][0]).focus();
        } else {
          show($('drain-form-error'), explain(err));
        }
      } finally {
        $('drain-submit').disabled = false;
      }
    });
  }

  // ---- plans -------------------------------------------------------------------------------

  // The zone's plan, for "Evacuate <zone>": the first plan (in name order, as GET /v1/plans
  // lists them) with an `evacuate` step for the zone, or failing that the first with a `drain`
  // step for it. No plan: none.
  function planForZone(plans, zone) {
    const moves = (p, type) => (p.steps || []).some((s) => s.type === type && s.zone === zone);
    return (plans || []).find((p) => moves(p, 'evacuate')) || (plans || []).find((p) => moves(p, 'drain')) || null;
  }

  function triggerText(t) {
    const parts = [];
    if (t.zone_down_for) parts.push('its zone has been down for ' + t.zone_down_for);
    if (t.zone_silent_for) parts.push('its zone has reported nothing for ' + t.zone_silent_for);
    if (t.lane_consumers_gone) parts.push('every lane consumer in ' + t.lane_consumers_gone + ' is gone' + (t.lane_consumers_gone_for ? ' for ' + t.lane_consumers_gone_for : ''));
    return parts.join(' or ');
  }

  function describeStep(s) {
    switch (s.type) {
      case 'evacuate': return 'Evacuate ' + s.zone + ' to ' + trim(s.to_percent) + ' %';
      case 'drain': return 'Drain ' + s.zone + ' to ' + trim(s.to_percent) + ' %';
      case 'dial': return 'Set the dial to ' + trim(s.blue_percent) + ' % blue';
      case 'pin': return 'Pin ' + s.user_id + ' to ' + s.color;
      case 'unpin': return 'Unpin ' + s.user_id;
      case 'wait_consumed': return 'Wait until ' + s.zone + '’s MQ half is consumed';
      case 'wait_precondition': return 'Wait for precondition ' + s.name;
      default: return s.type;
    }
  }

  function seconds(ms) {
    if (ms === null || ms === undefined) return '–';
    return ms < 10000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms / 1000) + ' s';
  }

  const RUN_TEXT = {
    running: '↘ Running',
    paused: '❚❚ Paused',
    holding: '⧗ Holding (drill)',
    restoring: '↗ Restoring',
    completed: '✓ Completed',
    aborted: '■ Aborted',
    rolled_back: '↩ Rolled back',
    failed: '✕ Failed',
  };
  const RUN_CSS = {
    running: 'state-draining', paused: 'state-paused', holding: 'state-draining', restoring: 'state-restoring',
    completed: 'state-active', aborted: 'state-drained', rolled_back: 'state-drained', failed: 'state-down',
  };
  function runBadge(state, id, holdReason) {
    if (state === 'running' && capacityHeld(holdReason)) return heldBadge(holdReason, id);
    return el('span', { class: 'badge ' + (RUN_CSS[state] || 'state-unknown'), id: id || null, 'data-state': state }, RUN_TEXT[state] || state);
  }
  function rtoVerdict(r, id) {
    const v = r.rto_verdict || 'pending';
    const css = v === 'met' ? 'ok' : v === 'missed' ? 'error' : 'muted';
    return el('strong', { class: 'verdict verdict-' + v + ' ' + css, id: id || null }, v === 'met' ? 'RTO met' : v === 'missed' ? 'RTO missed' : 'RTO pending');
  }

  const plansView = {
    plans: [],
    loaded: false,
    preview: null, // {name, kind, dry} while a preview is shown
    sending: false, // a run or drill is on its way: Enter again must not send a second one
    confirm: null, // {name, kind, revision} while the typed confirmation is open
    run: null, // {plan, id} of the run whose timeline is shown
    runTimer: null,
    reportsFor: null,
    opened: false, // ?plan=… handled
    automation: null, // the last GET /v1/automation answer: whether triggers may fire
    routing: null, // the last GET /v1/routing: the moving zone's share in the live timeline
    typed: null, // the typed confirmation of a run or drill (typedConfirm)
  };

  // The stop switch and the caps of automatic failover (GET/PUT /v1/automation).
  async function refreshAutomation() {
    const a = await api('GET', '/v1/automation');
    plansView.automationVersion = a.version;
    plansView.automation = a;
    const runs = (a.runs_since_armed || []).map((r) => el('li', {},
      'Automatic run ' + r.run + ' of ', el('strong', {}, r.plan), ' at ' + clock(r.started_at) + ' left ' + text(r.left_zone) + ': no automatic move back into it until re-armed.'));
    $('automation').replaceChildren(
      el('p', { id: 'automation-state' },
        el('span', { class: 'badge ' + (a.stopped ? 'state-down' : 'state-active') }, a.stopped ? '■ Stopped' : '● On'),
        a.stopped ? ' by ' + text(a.changed_by) + ': “' + text(a.reason) + '”' : '',
        a.triggers_enabled ? '' : ' (this coordinator has [plans] triggers = false: no trigger starts a run)'),
      el('p', { class: 'hint' }, 'Caps: once per incident, one hop, one automatic run per ' + text(a.window) + ', at most ' + a.max_share_percent + ' % of users per run.'),
      runs.length ? el('ul', { id: 'automation-runs' }, runs) : el('p', { class: 'muted', id: 'automation-runs' }, 'No automatic run since automation was armed.'));
    if ($('automation-stop')) {
      $('automation-stop').hidden = a.stopped;
    }
  }

  async function changeAutomation(stopped) {
    const reason = $('automation-reason').value.trim();
    const error = $('automation-error');
    if (!reason) {
      show(error, 'Give a reason: it is recorded in the audit log with your name.');
      return;
    }
    try {
      const routing = await api('GET', '/v1/routing');
      await api('PUT', '/v1/automation', { stopped, expected_version: routing.version, reason });
      error.hidden = true;
      $('automation-reason').value = '';
      await refreshAutomation();
    } catch (err) {
      show(error, explain(err));
    }
  }

  async function refreshPlans() {
    await refreshAutomation();
    const data = await api('GET', '/v1/plans');
    plansView.plans = data.plans || [];
    plansView.loaded = true;
    renderPlanList();
    // A page opened in the middle of a run shows it.
    if (!plansView.run) {
      const active = plansView.plans.find((p) => p.active_run);
      if (active) watchRun(active.name, active.active_run.id);
    }
    if (!plansView.opened) {
      plansView.opened = true;
      const q = new URLSearchParams(location.search);
      const name = q.get('plan');
      if (name) {
        const kind = ['run', 'drill'].includes(q.get('confirm')) && CAN_CHANGE ? q.get('confirm') : 'preview';
        if (plansView.plans.some((p) => p.name === name)) openPreview(name, kind);
        else $('plans').prepend(el('p', { class: 'error', role: 'alert', id: 'plan-missing' }, 'There is no plan ' + name + '.'));
      }
    }
    if (plansView.reportsFor) await refreshReports(plansView.reportsFor);
  }

  // Each plan's trigger and cooldown, and whether it can fire now: the stop switch
  // (GET /v1/automation) and [plans] triggers hold every trigger.
  function triggerLine(p) {
    const id = 'plan-trigger-' + p.name;
    if (!p.trigger) return el('p', { class: 'trigger muted', id, 'data-trigger': 'none' }, 'No trigger: it starts only when an operator runs it.');
    const a = plansView.automation;
    const held = a && (a.stopped || !a.triggers_enabled);
    return el('p', { class: 'trigger', id, 'data-trigger': held ? 'stopped' : 'armed' },
      '⚡ Starts by itself when ' + triggerText(p.trigger) + ' · cooldown ', el('strong', { id: 'plan-cooldown-' + p.name }, text(p.cooldown)), '. ',
      !a ? null
        : a.stopped ? el('span', { class: 'badge state-down' }, '■ Automation stopped: it will not fire')
          : !a.triggers_enabled ? el('span', { class: 'badge state-drained' }, '○ Triggers off on this coordinator')
            : el('span', { class: 'badge state-active' }, '● Armed'));
  }

  function lastDrillLine(p) {
    const d = p.last_drill;
    if (!d) return el('p', { class: 'muted', id: 'plan-last-drill-' + p.name }, 'Never drilled: a plan is only known to work once it has been drilled.');
    return el('p', { id: 'plan-last-drill-' + p.name, class: 'last-drill' },
      'Last drill: run ' + d.id + ' at ' + clock(d.started_at) + ', ', runBadge(d.state), ', ',
      el('strong', {}, seconds(d.switch_ms)), ' to switch, ' + seconds(d.total_ms) + ' in all, against an RTO of ' + text(d.rto) + ': ', rtoVerdict(d));
  }

  function renderPlanList() {
    if (!plansView.plans.length) {
      $('plans').replaceChildren(el('section', { class: 'card empty', id: 'plans-empty' },
        el('h2', {}, 'No plans yet'),
        el('p', {}, 'Write one for the incident you fear most, e.g. “az-b is failing”: evacuate az-b to 0 %, wait until its MQ half is consumed, with the database primary in az-a as a precondition and an RTO. Store it with PUT /v1/plans/{name}; the manual’s “Plans, runs and drills” chapter (docs/src/plans.md) has an example.')));
      return;
    }
    const cards = plansView.plans.map((p) => {
      // The plan list does not carry holds: the watched run's report does.
      const report = p.active_run && plansView.report && plansView.report.plan === p.name && plansView.report.id === p.active_run.id ? plansView.report : null;
      const runHold = report ? report.hold_reason || report.drain_hold_reason : null;
      const runHeld = p.active_run && p.active_run.state === 'running' && capacityHeld(runHold);
      const steps = (p.steps || []).map((s) => el('li', {}, describeStep(s)));
      const pre = (p.preconditions || []).map((c) => el('li', {}, el('strong', {}, c.name), ': ', el('code', {}, c.promql ? 'promql ' + c.promql : 'http ' + c.http)));
      return el('article', { class: 'card plan', id: 'plan-' + p.name, 'data-plan': p.name },
        el('div', { class: 'zone-head' },
          el('h3', {}, p.name),
          el('span', { class: 'chip' }, 'revision ' + p.revision),
          el('span', { class: 'chip' }, 'RTO ' + text(p.rto)),
          p.active_run ? runBadge(p.active_run.state, null, runHold) : null),
        el('ol', { class: 'plan-steps' }, steps),
        triggerLine(p),
        pre.length ? el('div', {}, el('h4', {}, 'Preconditions'), el('ul', { class: 'plan-preconditions' }, pre)) : null,
        lastDrillLine(p),
        p.active_run ? el('p', { class: 'hold' + (runHeld ? ' held' : ''), id: 'plan-active-' + p.name }, (p.active_run.drill ? 'Drill ' : 'Run ') + p.active_run.id + ' is ' + (runHeld ? 'held by the capacity check' : p.active_run.state.replace('_', ' ')) + '. ',
          el('button', { type: 'button', class: 'quiet', id: 'follow-' + p.name, 'data-follow': p.active_run.id }, 'Follow it')) : null,
        el('p', { class: 'meta' }, 'Revision ' + p.revision + ' by ' + text(p.updated_by) + ' at ' + clock(p.updated_at) + ': “' + text(p.reason) + '”'),
        el('div', { class: 'buttons' },
          el('button', { type: 'button', id: 'preview-' + p.name, 'data-kind': 'preview' }, 'Preview (dry run)'),
          CAN_CHANGE ? el('button', { type: 'button', class: 'warn', id: 'run-' + p.name, 'data-kind': 'run' }, 'Run…') : null,
          CAN_CHANGE ? el('button', { type: 'button', id: 'drill-' + p.name, 'data-kind': 'drill' }, 'Drill…') : null,
          el('button', { type: 'button', class: 'quiet', id: 'reports-' + p.name, 'data-kind': 'reports' }, 'Past reports')));
    });
    $('plans').replaceChildren(...cards);
    for (const card of $('plans').querySelectorAll('article.plan')) {
      const name = card.dataset.plan;
      for (const button of card.querySelectorAll('button[data-kind]')) {
        button.addEventListener('click', () => {
          if (button.dataset.kind === 'reports') showReports(name);
          else openPreview(name, button.dataset.kind);
        });
      }
      const follow = card.querySelector('button[data-follow]');
      if (follow) follow.addEventListener('click', () => watchRun(name, Number(follow.dataset.follow)));
    }
  }

  // The dry run: what running the plan now would do. Changes nothing (viewers may ask too).
  async function openPreview(name, kind) {
    const card = $('plan-preview-card');
    card.hidden = false;
    closePlanConfirm();
    plansView.preview = { name, kind, dry: null };
    $('plan-preview-title').textContent = 'Preview of ' + name;
    $('plan-preview').replaceChildren(el('p', { class: 'muted' }, 'Asking tidegate for a dry run of ' + name + '…'));
    card.scrollIntoView({ block: 'start' });
    let dry;
    try {
      dry = await api('POST', '/v1/plans/' + encodeURIComponent(name) + '/dry-run', {});
    } catch (err) {
      $('plan-preview').replaceChildren(el('p', { class: 'error', role: 'alert', id: 'plan-preview-error' }, 'The dry run failed: ' + explain(err)));
      return;
    }
    if (!plansView.preview || plansView.preview.name !== name) return;
    plansView.preview.dry = dry;
    renderPreview(dry);
    if (CAN_CHANGE && (kind === 'run' || kind === 'drill')) openPlanConfirm(name, kind, dry);
  }

  function capacityCell(c) {
    if (!c || c.verdict === 'unchecked') return el('td', { class: 'muted' }, 'not checked (no capacity configured)');
    if (c.verdict === 'unknown') return el('td', { class: 'unknown' }, '? ' + text(c.detail));
    const line = c.zone + ': ' + Math.round(c.projected_rps) + ' of ' + Math.round(c.allowed_rps) + ' rps allowed' + (c.estimated ? ' (estimated)' : '');
    return el('td', { class: c.verdict === 'fits' ? '' : 'error', 'data-verdict': c.verdict }, (c.verdict === 'fits' ? '✓ ' : '✕ ') + line);
  }

  function renderPreview(dry) {
    const fits = dry.fits_rto;
    const parts = [
      el('p', { class: 'summary', id: 'plan-preview-summary' },
        'Dry run of ', el('strong', {}, dry.plan), ' (revision ' + dry.revision + '): expected ',
        el('strong', { id: 'plan-preview-expected' }, text(dry.expected_duration)), ' against an RTO of ', el('strong', {}, text(dry.rto)), ': ',
        el('strong', { class: fits ? 'ok' : 'error', id: 'plan-preview-fits' }, fits ? 'fits' : 'exceeds the RTO'), '.'),
    ];
    if (dry.would_start) parts.push(el('p', { class: 'ok', id: 'plan-preview-start' }, '✓ It would start now.'));
    else {
      parts.push(el('div', { class: 'error', id: 'plan-preview-refusals', role: 'alert' }, 'It would not start now:',
        el('ul', {}, (dry.refusals || []).map((r) => el('li', {}, r)))));
    }
    if ((dry.preconditions || []).length) {
      parts.push(el('h3', {}, 'Preconditions'), el('ul', { id: 'plan-preview-preconditions' }, dry.preconditions.map((c) =>
        el('li', { class: c.passed === true ? 'ok' : 'error' }, el('strong', {}, c.name), ': ',
          c.passed === true ? 'true' : c.passed === false ? 'false' : 'could not be checked (' + text(c.error) + ')'))));
    }
    const rows = (dry.steps || []).map((s) => el('tr', { 'data-step': s.index },
      el('td', { class: 'num' }, s.index + 1),
      el('td', {}, text(s.description)),
      el('td', { class: 'nowrap' }, pct(s.blue_percent_before) + ' → ' + pct(s.blue_percent_after)),
      el('td', { class: 'num' }, pct(s.users_moved_percent)),
      el('td', { class: 'num' }, seconds(s.expected_ms)),
      capacityCell(s.capacity),
      el('td', { class: (s.holds || []).length ? 'hold' : 'muted' }, (s.holds || []).length ? s.holds.join('; ') : 'none')));
    parts.push(el('h3', {}, 'Steps'), el('div', { class: 'table-wrap' }, stacked(el('table', { id: 'plan-preview-steps' },
      el('thead', {}, el('tr', {},
        el('th', { scope: 'col', class: 'num' }, '#'),
        el('th', { scope: 'col' }, 'Step'),
        el('th', { scope: 'col' }, 'Blue share'),
        el('th', { scope: 'col', class: 'num' }, 'Users moved'),
        el('th', { scope: 'col', class: 'num' }, 'Expected'),
        el('th', { scope: 'col' }, 'Projected load vs capacity'),
        el('th', { scope: 'col' }, 'Would hold'))),
      el('tbody', {}, rows)))));
    const backlog = dry.backlog || {};
    parts.push(el('ul', { class: 'meta', id: 'plan-preview-zones' }, (dry.zones || []).map((z) => el('li', {},
      el('strong', {}, z.zone), ': load ' + (z.load_rps === null || z.load_rps === undefined ? 'unknown (' + text(z.load_unknown_reason) + ')' : Math.round(z.load_rps) + ' rps now') +
      ', MQ backlog ' + (backlog[z.zone] === null || backlog[z.zone] === undefined ? 'unknown' : messages(backlog[z.zone]))))));
    if ((dry.holds || []).length) parts.push(el('p', { class: 'hold', id: 'plan-preview-holds' }, 'Would hold: ' + dry.holds.join('; ')));
    $('plan-preview').replaceChildren(...parts);
  }

  function openPlanConfirm(name, kind, dry) {
    const c = $('plan-confirm');
    if (!c) return;
    plansView.confirm = { name, kind, revision: dry.revision };
    $('plan-confirm-title').textContent = (kind === 'drill' ? 'Drill plan ' : 'Run plan ') + name;
    $('plan-confirm-expected').textContent = name;
    $('plan-confirm-summary').textContent = (kind === 'drill'
      ? 'A drill runs every step for real, holds the switched state, then restores it, and writes a report marked as a drill. '
      : 'The run moves real users, step by step, as one audited action signed with your name. ') +
      (dry.steps || []).length + ' step(s), expected ' + text(dry.expected_duration) + ' against an RTO of ' + text(dry.rto) + '.' +
      (dry.would_start ? '' : ' The dry run says it would not start now; tidegate will refuse it with the reason.');
    $('plan-confirm-hold-row').hidden = kind !== 'drill';
    $('plan-confirm-go').textContent = kind === 'drill' ? 'Drill ' + name : 'Run ' + name;
    $('plan-confirm-name').value = '';
    show($('plan-confirm-error'), '');
    c.hidden = false;
    updatePlanGo();
    $('plan-confirm-name').focus();
  }

  function closePlanConfirm() {
    plansView.confirm = null;
    const c = $('plan-confirm');
    if (c) c.hidden = true;
  }

  function updatePlanGo() {
    if (plansView.typed) plansView.typed.update();
  }

  async function sendPlanRun() {
    const c = plansView.confirm;
    if (!c || plansView.sending || !plansView.typed.matches()) return;
    const reason = $('plan-confirm-reason').value.trim();
    if (!reason) {
      $('plan-confirm-reason').setAttribute('aria-invalid', 'true');
      show($('plan-confirm-error'), 'Give a reason: it goes into the audit log with your name.');
      $('plan-confirm-reason').focus();
      return;
    }
    $('plan-confirm-reason').removeAttribute('aria-invalid');
    const payload = { reason, plan_revision: c.revision };
    if (c.kind === 'drill') payload.hold = $('plan-confirm-hold').value.trim() || '30s';
    plansView.sending = true;
    updatePlanGo();
    show($('plan-confirm-error'), '');
    try {
      const run = await api('POST', '/v1/plans/' + encodeURIComponent(c.name) + '/' + c.kind, payload);
      $('plan-confirm-reason').value = '';
      $('plan-confirm-name').value = '';
      closePlanConfirm();
      watchRun(run.plan, run.id, run);
      poll(true);
    } catch (err) {
      show($('plan-confirm-error'), explain(err));
    } finally {
      plansView.sending = false;
      if (plansView.confirm) updatePlanGo();
    }
  }

  function wirePlanConfirm() {
    plansView.typed = typedConfirm({
      field: 'plan-confirm-name', go: 'plan-confirm-go', error: 'plan-confirm-error', cancel: 'plan-confirm-cancel',
      enter: ['plan-confirm-reason', 'plan-confirm-hold'],
      expected: () => plansView.confirm && plansView.confirm.name,
      busy: () => plansView.sending,
      send: sendPlanRun,
      close: closePlanConfirm,
    });
    clearOnInput('plan-confirm-reason', 'plan-confirm-error');
  }

  // The live timeline: the run's report, read every second (each read gives up after 3 s).
  const RUN_POLL_MS = 1000;
  const RUN_READ_TIMEOUT_MS = 3000;

  function watchRun(plan, id, first) {
    clearTimeout(plansView.runTimer);
    plansView.run = { plan, id };
    $('plan-run-card').hidden = false;
    if (first) renderRun(first);
    else $('plan-run').replaceChildren(el('p', { class: 'muted' }, 'Reading run ' + id + ' of ' + plan + '…'));
    pollRun();
  }

  async function pollRun() {
    const w = plansView.run;
    if (!w || stopped) return;
    clearTimeout(plansView.runTimer);
    let r = null;
    try {
      const [run, routing] = await Promise.all([
        api('GET', '/v1/plans/' + encodeURIComponent(w.plan) + '/runs/' + w.id, null, RUN_READ_TIMEOUT_MS),
        api('GET', '/v1/routing', null, RUN_READ_TIMEOUT_MS),
      ]);
      r = run;
      plansView.routing = routing;
      show($('plan-run-poll-error'), '');
    } catch (err) {
      show($('plan-run-poll-error'), 'Not updating: ' + explain(err) + ' Retrying every second; the timeline may be old.');
    }
    if (plansView.run !== w) return;
    if (r) renderRun(r);
    if (!r || r.active) plansView.runTimer = setTimeout(pollRun, RUN_POLL_MS);
    else poll(true); // the list's last drill and active run, and the reports, follow the end
  }

  // The zone a step moves users out of or into (a dial step: blue's), and the share the step
  // leaves it at; wait steps and pins belong to the move before them.
  function stepZone(steps, i) {
    for (let j = Math.min(i, steps.length - 1); j >= 0; j--) {
      const s = steps[j];
      if (s.type === 'evacuate' || s.type === 'drain') return s.zone;
      if (s.type === 'dial') return BLUE_ZONE;
    }
    const first = steps.find((s) => s.zone);
    return first ? first.zone : BLUE_ZONE;
  }
  function stepTarget(s) {
    if (!s) return null;
    if (s.type === 'evacuate' || s.type === 'drain') return s.to_percent;
    if (s.type === 'dial') return s.blue_percent;
    return null;
  }
  function shareOf(zone) {
    const t = plansView.routing;
    if (!t) return null;
    return zone === GREEN_ZONE ? t.green_percent : t.blue_percent;
  }

  function renderRun(r) {
    plansView.report = r;
    const plan = plansView.plans.find((p) => p.name === r.plan);
    const steps = plan ? plan.steps : [];
    const labels = steps.map(describeStep);
    const hold = r.hold_reason || r.drain_hold_reason;
    const held = r.state === 'running' && capacityHeld(hold);
    const movingZone = steps.length ? stepZone(steps, r.active ? r.step : steps.length - 1) : null;
    const share = movingZone ? shareOf(movingZone) : null;
    const records = r.timeline || [];
    const at = (ms) => (ms === null || ms === undefined ? '–' : '+' + seconds(ms - r.started_ms));
    const rows = [];
    for (let i = 0; i < r.steps_total; i++) {
      const rec = records.find((x) => x.index === i && x.phase !== 'restore');
      const current = r.active && r.step === i;
      const status = rec && rec.settled_ms ? 'done' : current ? (r.state === 'paused' ? 'paused' : held ? 'held' : 'in progress') : rec ? 'started' : 'pending';
      const rowZone = steps.length ? stepZone(steps, i) : null;
      const target = stepTarget(steps[i]);
      const goal = target === null || target === undefined ? '' : pct(target);
      // The moving zone's share: live for the current step, the step's target otherwise.
      const shareCell = current && share !== null
        ? el('td', { class: 'share-now nowrap', id: 'plan-run-share-cell', 'data-zone': rowZone },
          rowZone + ' ', el('strong', {}, pct(share)), el('span', { class: 'hint' }, ' now' + (goal ? ' → ' + goal : '')))
        : el('td', { class: 'nowrap' + (status === 'done' ? '' : ' muted'), 'data-zone': rowZone }, goal ? rowZone + ' ' + (status === 'done' ? '' : '→ ') + goal : '–');
      const statusText = status === 'done' ? '✓ done' : status === 'held' ? '◷ held' : status;
      rows.push(el('tr', { 'data-step': i, 'data-status': status, class: 'step-' + status.replace(' ', '-') },
        el('td', { class: 'num' }, i + 1),
        el('td', {}, rec ? text(rec.step) : text(labels[i])),
        el('td', { class: 'num' }, rec ? at(rec.started_ms) : '–'),
        el('td', { class: 'num' }, rec ? at(rec.converged_ms) : '–'),
        el('td', { class: 'num' }, rec ? at(rec.settled_ms) : '–'),
        shareCell,
        el('td', {}, statusText,
          current && hold ? el('span', { class: 'hint' }, (held ? ': ' : ' held: ') + holdText(hold)) : null)));
    }
    for (const rec of records.filter((x) => x.phase === 'restore')) {
      rows.push(el('tr', { 'data-step': 'restore', 'data-status': rec.settled_ms ? 'done' : 'in progress' },
        el('td', { class: 'num' }, '↩'), el('td', {}, 'Restore (drill)'),
        el('td', { class: 'num' }, at(rec.started_ms)), el('td', { class: 'num' }, at(rec.converged_ms)),
        el('td', { class: 'num' }, at(rec.settled_ms)), el('td', {}, '–'), el('td', {}, rec.settled_ms ? '✓ done' : 'in progress')));
    }
    const errors = (r.errors || []).map((e) => el('li', {}, el('strong', {}, e.zone), ': highest error rate ' +
      (e.max_error_rate === null || e.max_error_rate === undefined ? 'unknown' : pct(e.max_error_rate * 100, 2)) + ' over ' + e.samples.length + ' reading(s)'));
    const elapsed = r.total_ms;
    const over = elapsed > r.rto_ms;
    $('plan-run-title').textContent = (r.drill ? 'Drill ' : 'Run ') + r.id + ' of ' + r.plan;
    $('plan-run').replaceChildren(
      el('div', { class: 'zone-head' }, el('h3', {}, 'Plan revision ' + r.revision + (r.drill ? ' · drill, holding ' + seconds(r.drill_hold_ms) : '')), runBadge(r.state, 'plan-run-state', hold)),
      el('ul', { class: 'drain-facts' },
        el('li', {}, r.active ? 'Step ' : 'Steps done: ', el('strong', { id: 'plan-run-step' }, r.active ? Math.min(r.step + 1, r.steps_total) + ' of ' + r.steps_total : records.filter((x) => x.settled_ms && x.phase !== 'restore').length + ' of ' + r.steps_total),
          r.current_step ? ': ' + r.current_step : ''),
        movingZone && share !== null ? el('li', {}, movingZone + '’s share now ', el('strong', { id: 'plan-run-share', 'data-zone': movingZone }, pct(share))) : null,
        el('li', {}, 'Elapsed ', el('strong', { id: 'plan-run-elapsed', class: over ? 'error' : '' }, seconds(elapsed)), ' against an RTO of ' + text(r.rto) +
          (r.switch_ms !== null && r.switch_ms !== undefined ? '; switched in ' + seconds(r.switch_ms) : '') + ' · ', rtoVerdict(r, 'plan-run-verdict')),
        hold ? el('li', { class: 'hold' + (held ? ' held' : ''), id: 'plan-run-hold' }, (held ? 'held: ' : 'Held: ') + holdText(hold)) : null,
        r.fail_reason ? el('li', { class: 'error', id: 'plan-run-fail' }, 'Failed: ' + r.fail_reason) : null,
        el('li', { class: 'muted' }, 'Started by ' + text(r.started_by) + ' at ' + clock(r.started_at) + ': “' + text(r.reason) + '”')),
      el('div', { class: 'table-wrap' }, stacked(el('table', { id: 'plan-run-timeline' },
        el('thead', {}, el('tr', {},
          el('th', { scope: 'col', class: 'num' }, '#'),
          el('th', { scope: 'col' }, 'Step'),
          el('th', { scope: 'col', class: 'num' }, 'Started'),
          el('th', { scope: 'col', class: 'num' }, 'Converged'),
          el('th', { scope: 'col', class: 'num' }, 'Settled'),
          el('th', { scope: 'col', title: 'the moving zone’s share of users: now for the current step, the target for the others' }, 'Share'),
          el('th', { scope: 'col' }, 'Status'))),
        el('tbody', {}, rows)))),
      el('h4', {}, 'Errors per zone during the run'),
      errors.length ? el('ul', { id: 'plan-run-errors' }, errors) : el('p', { class: 'muted', id: 'plan-run-errors' }, 'No readings yet.'));
    const actions = $('plan-run-actions');
    if (actions) {
      actions.hidden = !r.active;
      $('plan-run-pause').disabled = r.state === 'paused';
      $('plan-run-resume').disabled = r.state !== 'paused';
    }
  }

  function wireRunActions() {
    clearOnInput('plan-run-reason', 'plan-run-error');
    for (const id of ['plan-run-pause', 'plan-run-resume', 'plan-run-abort', 'plan-run-rollback']) {
      $(id).addEventListener('click', async (event) => {
        const button = event.currentTarget;
        const w = plansView.run;
        show($('plan-run-error'), '');
        show($('plan-run-flash'), '');
        if (!w) return;
        const reason = $('plan-run-reason').value.trim();
        if (!reason) {
          $('plan-run-reason').setAttribute('aria-invalid', 'true');
          show($('plan-run-error'), 'Give a reason for the ' + button.textContent.toLowerCase() + ': it goes into the audit log with your name.');
          $('plan-run-reason').focus();
          return;
        }
        button.disabled = true;
        try {
          const r = await api('POST', '/v1/plans/' + encodeURIComponent(w.plan) + '/runs/' + w.id + '/' + button.dataset.action, { reason });
          $('plan-run-reason').value = '';
          show($('plan-run-flash'), 'Run ' + r.id + ' is now ' + r.state.replace('_', ' ') + '.');
          renderRun(r);
        } catch (err) {
          show($('plan-run-error'), explain(err));
        } finally {
          button.disabled = false;
          pollRun();
        }
      });
    }
  }

  async function showReports(name) {
    plansView.reportsFor = name;
    $('plan-reports-card').hidden = false;
    $('plan-reports-title').textContent = 'Past reports of ' + name;
    $('plan-reports').replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      await refreshReports(name);
    } catch (err) {
      $('plan-reports').replaceChildren(el('p', { class: 'error', role: 'alert' }, 'Could not read the runs: ' + explain(err)));
    }
    $('plan-reports-card').scrollIntoView({ block: 'start' });
  }

  async function refreshReports(name) {
    const data = await api('GET', '/v1/plans/' + encodeURIComponent(name) + '/runs');
    if (plansView.reportsFor !== name) return;
    const runs = data.runs || [];
    if (!runs.length) {
      $('plan-reports').replaceChildren(el('p', { class: 'muted', id: 'plan-reports-none' }, name + ' has never run or been drilled.'));
      return;
    }
    const rows = runs.map((r) => el('tr', { 'data-run': r.id },
      el('td', { class: 'num' }, r.id),
      el('td', {}, r.drill ? 'drill' : 'run'),
      el('td', { class: 'nowrap' }, clock(r.started_at)),
      el('td', {}, text(r.started_by)),
      el('td', {}, runBadge(r.state)),
      el('td', { class: 'num' }, seconds(r.total_ms) + ' / ' + text(r.rto)),
      el('td', {}, rtoVerdict(r)),
      el('td', {}, el('button', { type: 'button', class: 'quiet', 'data-open': r.id }, 'Timeline'))));
    $('plan-reports').replaceChildren(el('div', { class: 'table-wrap' }, stacked(el('table', { id: 'plan-reports-table' },
      el('thead', {}, el('tr', {},
        el('th', { scope: 'col', class: 'num' }, 'Run'),
        el('th', { scope: 'col' }, 'Kind'),
        el('th', { scope: 'col' }, 'Started'),
        el('th', { scope: 'col' }, 'By'),
        el('th', { scope: 'col' }, 'Outcome'),
        el('th', { scope: 'col', class: 'num' }, 'Total / RTO'),
        el('th', { scope: 'col' }, 'RTO'),
        el('th', { scope: 'col' }, ''))),
      el('tbody', {}, rows)))));
    for (const b of $('plan-reports').querySelectorAll('button[data-open]')) {
      b.addEventListener('click', () => { watchRun(name, Number(b.dataset.open)); $('plan-run-card').scrollIntoView({ block: 'start' }); });
    }
  }

  function startPlans() {
    refresh = refreshPlans;
    refreshFailed = (err) => {
      if (plansView.loaded) return;
      $('plans').replaceChildren(el('p', { class: 'error', id: 'plans-error', role: 'alert' }, 'Could not read the plans: ' + explain(err)));
    };
    if (CAN_CHANGE) {
      wirePlanConfirm();
      wireRunActions();
      $('automation-stop').addEventListener('click', () => changeAutomation(true));
      $('automation-start').addEventListener('click', () => changeAutomation(false));
    }
    poll(false);
  }

  // ---- start -------------------------------------------------------------------------------

  if (PAGE === 'overview') startOverview();
  if (PAGE === 'lanes') startLanes();
  if (PAGE === 'plans') startPlans();
  if (PAGE === 'drain' && CAN_CHANGE) startDrainForm();
})();
