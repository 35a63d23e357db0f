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
  const UNITS = Number(body.dataset.units) || 100;
  const STEP = 100 / UNITS;
  const WINDOW = body.dataset.window || '';
  const BLUE_ZONE = body.dataset.blueZone;
  const GREEN_ZONE = body.dataset.greenZone;
  const POLL_MS = 2000;
  const HISTORY_MS = 5 * 60 * 1000;
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

  async function api(method, path, payload) {
    const options = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    if (method !== 'GET') {
      options.headers['Content-Type'] = 'application/json';
      options.headers['X-CSRF-Token'] = CSRF;
      options.body = JSON.stringify(payload || {});
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (e) {
      throw new ApiError(0, 'network', 'tidegate did not answer. Check that it is running and that this machine can reach it.');
    }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      const code = (data && data.error) || 'http_' + response.status;
      const detail = (data && data.detail) || response.statusText || 'the request failed';
      if (response.status === 401) sessionEnded();
      throw new ApiError(response.status, code, detail, data);
    }
    return data;
  }

  function sessionEnded() {
    const live = $('live');
    if (!live) return;
    live.className = 'live stale';
    live.replaceChildren('Your session has ended. ', el('a', { href: '/ui/login' }, 'Log in again'), ' to carry on.');
    stopped = true;
  }

  // A readable sentence for an API error, for the message next to the control that caused it.
  function explain(err) {
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
      live.textContent = 'Not updating: ' + explain(err) + ' Retrying every ' + POLL_MS / 1000 + ' s; the values below may be old.';
    }
  }

  // ---- overview --------------------------------------------------------------------------

  const view = {
    routing: null,
    zones: null,
    drains: [],
    history: loadHistory(), // zone -> [{t, rate}] over the last HISTORY_MS, kept in this tab only
    editing: false, // the operator moved the dial and has not confirmed or cancelled yet
    confirm: null, // {target, version} while the confirm step is open
  };

  // The chart history survives moving between the console's pages (sessionStorage is per tab
  // and ends with it), so a glance at the audit log does not blank the charts.
  function loadHistory() {
    try { return JSON.parse(sessionStorage.getItem('tidegate-history')) || {}; } catch (_) { return {}; }
  }
  function saveHistory(history) {
    try { sessionStorage.setItem('tidegate-history', JSON.stringify(history)); } catch (_) { /* full or disabled: charts restart */ }
  }

  async function refreshOverview() {
    const [routing, zones, drains] = await Promise.all([
      api('GET', '/v1/routing'),
      api('GET', '/v1/zones'),
      api('GET', '/v1/drains'),
    ]);
    view.routing = routing;
    view.zones = zones;
    view.drains = drains.drains || [];
    const now = Date.now();
    for (const z of zones.zones) {
      const ring = (view.history[z.zone] = view.history[z.zone] || []);
      ring.push({ t: now, rate: z.error_rate });
      while (ring.length && ring[0].t < now - HISTORY_MS) ring.shift();
    }
    saveHistory(view.history);
    renderDial();
    renderZones();
    renderDrain();
  }

  function renderDial() {
    const r = view.routing;
    $('routing-version').textContent = r.version;
    $('blue-percent').textContent = pct(r.blue_percent);
    $('green-percent').textContent = pct(r.green_percent);
    $('split-blue').style.width = r.blue_percent + '%';
    const pins = Object.keys(r.pins || {}).length;
    $('routing-pins').textContent = pins === 1 ? '1 pinned user' : pins + ' pinned users';
    if (!CAN_CHANGE) return;
    // While the operator is deciding, the poll updates what is *current* but never touches
    // the value they are choosing.
    if (!view.editing) setDialInputs(r.blue_percent);
    if (view.confirm && view.confirm.version !== r.version) {
      show($('dial-stale'), 'The routing changed while you were deciding: it is now at version ' + r.version + ' with ' +
        pct(r.blue_percent) + ' blue. Confirming will be refused; cancel and review again.');
    }
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
    clearOnInput('dial-reason', 'dial-confirm-error');
    $('dial-reason').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); applyDial(); }
    });
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
    if (Math.abs(target - r.blue_percent) < 1e-9) {
      show($('dial-error'), 'The dial is already at ' + pct(target) + ' blue; there is nothing to change.');
      return;
    }
    view.confirm = { target, version: r.version };
    const moving = Math.abs(target - r.blue_percent);
    const [from, to] = target < r.blue_percent
      ? ['blue (' + BLUE_ZONE + ')', 'green (' + GREEN_ZONE + ')']
      : ['green (' + GREEN_ZONE + ')', 'blue (' + BLUE_ZONE + ')'];
    const requests = (view.zones ? view.zones.zones : []).reduce((sum, z) => sum + (z.requests || 0), 0);
    const share = trim(moving) + ' % of users';
    const summary = requests > 0
      ? share + ' (about ' + count(Math.round(requests * moving / 100)) + ' users of the last ' + WINDOW + ') will move from ' + from + ' to ' + to + '.'
      : share + ' will move from ' + from + ' to ' + to + '. No traffic was reported in the last ' + WINDOW + ', so how many users that is is unknown.';
    $('dial-summary').textContent = summary + ' The dial goes from ' + pct(r.blue_percent) + ' to ' + pct(target) + ' blue.';
    show($('dial-stale'), '');
    show($('dial-confirm-error'), '');
    $('dial-confirm').hidden = false;
    $('dial-review').disabled = true;
    $('dial-reason').focus();
  }

  function closeConfirm(resetValue) {
    view.confirm = null;
    view.editing = false;
    $('dial-confirm').hidden = true;
    $('dial-review').disabled = false;
    show($('dial-confirm-error'), '');
    if (resetValue && view.routing) setDialInputs(view.routing.blue_percent);
  }

  async function applyDial() {
    const c = view.confirm;
    if (!c) return;
    const reason = $('dial-reason').value.trim();
    if (!reason) {
      $('dial-reason').setAttribute('aria-invalid', 'true');
      show($('dial-confirm-error'), 'Give a reason: it goes into the audit log with your name.');
      $('dial-reason').focus();
      return;
    }
    $('dial-reason').removeAttribute('aria-invalid');
    $('dial-apply').disabled = true;
    try {
      const result = await api('PUT', '/v1/dial', { blue_percent: c.target, expected_version: c.version, reason });
      $('dial-reason').value = '';
      closeConfirm(false);
      show($('dial-ok'), 'Done: the dial is at ' + pct(result.blue_percent) + ' blue (routing version ' + result.version + ').');
      await poll(true);
    } catch (err) {
      if (err.code === 'version_conflict') {
        // Someone else moved the dial first. Never retry with the new version behind the
        // operator's back: show what is current now and let them decide again.
        closeConfirm(false);
        await poll(true);
        const now = view.routing;
        show($('dial-error'), 'Not applied: someone else changed the routing while you were deciding (you started from version ' +
          c.version + '; it is now version ' + (err.body.current_version || (now && now.version)) + '). The dial now shows the current value, ' +
          (now ? pct(now.blue_percent) + ' blue' : 'reloaded') + '. Review it, and move it again if you still need to.');
      } else {
        show($('dial-confirm-error'), explain(err));
      }
    } finally {
      $('dial-apply').disabled = false;
    }
  }

  const STATE_TEXT = {
    active: '✓ Active',
    draining: '↘ Draining',
    restoring: '↗ Restoring',
    drained: '○ Drained',
    down: '✕ Down',
  };

  function renderZones() {
    const z = view.zones;
    $('zones-window').textContent = 'error rate and requests over the last ' + z.window + '; charts: last 5 minutes, this tab only';
    const cards = z.zones.map((zone) => {
      const known = zone.error_rate !== null && zone.error_rate !== undefined;
      return el('article', { class: 'zone', id: 'zone-' + zone.zone, 'data-state': zone.state },
        el('div', { class: 'zone-head' },
          el('h3', {}, zone.zone),
          el('span', { class: 'chip chip-' + zone.color }, zone.color),
          el('span', { class: 'badge state-' + zone.state, id: 'zone-state-' + zone.zone }, STATE_TEXT[zone.state] || zone.state)),
        el('dl', {},
          el('div', {}, el('dt', {}, 'Share of users'), el('dd', {}, pct(zone.share_percent))),
          el('div', {}, el('dt', {}, 'Error rate'), el('dd', { class: known ? '' : 'muted' }, known ? pct(zone.error_rate * 100, 2) : 'unknown')),
          el('div', {}, el('dt', {}, 'Requests (' + z.window + ')'), el('dd', {}, count(zone.requests)))),
        known ? null : el('p', { class: 'unknown' }, '? Health unknown: ' + (zone.unknown_reason || 'no reading') + '.'),
        chart(view.history[zone.zone] || []));
    });
    $('zones').replaceChildren(...cards);
  }

  // A small SVG line of the error rate, with the guard's limit as a dashed line.
  function chart(points) {
    const NS = 'http://www.w3.org/2000/svg';
    const W = 560, H = 96, L = 38, T = 8, B = 16;
    const active = view.drains.find((d) => ACTIVE_DRAIN.includes(d.state));
    const limit = active ? active.guard.max_error_rate : Number(body.dataset.guardMax || 0.02);
    const rates = points.filter((p) => p.rate !== null && p.rate !== undefined).map((p) => p.rate);
    const top = Math.max(limit * 1.5, ...rates.map((r) => r * 1.15), 0.001);
    const now = Date.now();
    const x = (t) => L + (W - L) * (1 - (now - t) / HISTORY_MS);
    const y = (r) => T + (H - T - B) * (1 - r / top);
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('class', 'chart');
    svg.setAttribute('role', 'img');
    const last = rates.length ? rates[rates.length - 1] : null;
    svg.setAttribute('aria-label', 'Error rate over the last 5 minutes' + (last === null ? ': unknown' : ', now ' + pct(last * 100, 2)));
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
      const parts = [el('p', { id: 'no-drain' }, 'No drain is active. The dial is free.')];
      if (latest) {
        parts.push(el('p', { class: 'muted' }, 'Latest: drain ' + latest.id + ' of ' + latest.zone + ', ',
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
    target.replaceChildren(
      el('div', { class: 'zone-head' },
        el('h3', {}, 'Drain ' + d.id + ': ' + d.zone + ' → ' + d.receiving_zone),
        el('span', { class: 'badge state-' + d.state, id: 'drain-state' }, DRAIN_TEXT[d.state] || d.state)),
      el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': d.steps_total, 'aria-valuenow': d.steps_done, 'aria-label': 'Drain progress' }, bar),
      el('ul', { class: 'drain-facts' },
        el('li', {}, 'Step ', el('strong', { id: 'drain-steps' }, d.steps_done + ' of ' + d.steps_total), ' · ', d.zone, ' share now ',
          el('strong', {}, pct(d.current_percent)), ' (' + pct(d.from_percent) + ' → ' + pct(d.target_percent) + ', ' + trim(d.step_percent) + ' % every ' + d.interval + ')'),
        d.next_step_at ? el('li', {}, 'Next check and step at ' + clock(d.next_step_at)) : null,
        el('li', {}, 'Guard: error rate ≤ ' + pct(g.max_error_rate * 100, 1) + ' with ≥ ' + count(g.min_requests) + ' requests; ' + g.breaches + ' failed check(s) in a row → ' + (g.on_breach === 'rollback' ? 'roll back' : 'pause')),
        el('li', { class: 'muted' }, 'Started by ' + d.started_by + ': “' + d.reason + '”')),
      d.hold_reason ? el('p', { class: 'hold', id: 'drain-hold' }, 'Held: ' + d.hold_reason) : null);
    if (CAN_CHANGE) {
      $('drain-actions').hidden = false;
      $('drain-start-link').hidden = true;
      $('drain-pause').disabled = d.state === 'paused';
      $('drain-resume').disabled = d.state !== 'paused';
      $('drain-rollback').disabled = d.state === 'rolling_back';
    }
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
          show($('drain-flash'), 'Drain ' + d.id + ' is now ' + d.state.replace('_', ' ') + '.');
        } catch (err) {
          show($('drain-error'), explain(err));
        } finally {
          button.disabled = false;
          await poll(true);
        }
      });
    }
  }

  // ---- polling ---------------------------------------------------------------------------

  let timer = null;
  async function poll(once) {
    if (stopped) return;
    clearTimeout(timer);
    try {
      await refreshOverview();
      setLive(true);
    } catch (err) {
      setLive(false, err);
    }
    if (!stopped) timer = setTimeout(() => poll(false), POLL_MS);
    return once;
  }

  function startOverview() {
    if (CAN_CHANGE) {
      wireDial();
      wireDrainActions();
    }
    const started = new URLSearchParams(location.search).get('started');
    if (started) show($('drain-flash'), 'Drain ' + started + ' started.');
    poll(false);
  }

  // ---- drain form ------------------------------------------------------------------------

  const FIELDS = {
    zone: ['f-zone', 'e-zone'],
    target_percent: ['f-target', 'e-target'],
    step_percent: ['f-step', 'e-step'],
    interval: ['f-interval', 'e-interval'],
    max_error_rate: ['f-max-error', 'e-max-error'],
    min_requests: ['f-min-requests', 'e-min-requests'],
    breaches: ['f-breaches', 'e-breaches'],
    reason: ['f-reason', 'e-reason'],
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
    const problems = {
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
    return { problems, request };
  }

  // Which field an API error is about, from its code or the detail's leading field name.
  function fieldOf(err) {
    if (err.code === 'unknown_zone') return 'zone';
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
        location.assign('/ui?started=' + encodeURIComponent(drain.id));
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

  // ---- start -------------------------------------------------------------------------------

  if (PAGE === 'overview') startOverview();
  if (PAGE === 'drain' && CAN_CHANGE) startDrainForm();
})();
