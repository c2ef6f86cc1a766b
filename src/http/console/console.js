/* global document, sessionStorage, fetch, performance, setTimeout, setInterval, clearTimeout, URLSearchParams */
// The operator console: held locks (admin API), force-release, and two figures from /metrics.
// Plain browser JavaScript, no build step and no third-party code. Everything shown is set with
// textContent: lock keys and holder labels come from API callers and are never parsed as HTML.
'use strict';

const KEY_STORAGE = 'keyholder.adminKey';
/** 2 s: live enough to watch a hand-over, light enough (one listing per refresh) for a busy store. */
const REFRESH_MS = 2000;
const PAGE_LIMIT = 1000;
/** At most this many pages per refresh: a page is for looking at, not for exporting every lock. */
const MAX_PAGES = 10;

const $ = (id) => document.getElementById(id);
const state = { namespace: '', prefix: '', rows: [], timer: undefined, pending: null };

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

class Unauthorized extends Error {}

async function api(method, path) {
  const headers = {};
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(path, { method, headers, cache: 'no-store' });
  if (res.status === 401 || res.status === 403) {
    const problem = await res.json().catch(() => ({}));
    throw new Unauthorized(problem.detail || `HTTP ${res.status}`);
  }
  return res;
}

function showLogin(message) {
  clearTimeout(state.timer);
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('api-key').focus();
}

function showMain() {
  $('login').hidden = true;
  $('main').hidden = false;
}

async function listLocks() {
  const locks = new Map();
  let cursor;
  for (let page = 0; page < MAX_PAGES; page++) {
    const params = new URLSearchParams({ limit: String(PAGE_LIMIT) });
    if (state.namespace) params.set('namespace', state.namespace);
    // The API matches a prefix inside one namespace; across all namespaces the page filters itself.
    if (state.namespace && state.prefix) params.set('prefix', state.prefix);
    if (cursor) params.set('cursor', cursor);
    const res = await api('GET', `/v1/locks?${params}`);
    const body = await res.json();
    if (!res.ok) throw new Error(body.detail || `HTTP ${res.status}`);
    // The Redis store may show a lock on two pages: keep one row per lock.
    for (const lock of body.locks) locks.set(`${lock.namespace}\u0000${lock.key}`, lock);
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  const fetchedAt = performance.now();
  return [...locks.values()]
    .filter((l) => !state.prefix || l.key.startsWith(state.prefix))
    .sort((a, b) => (a.namespace === b.namespace ? a.key.localeCompare(b.key) : a.namespace.localeCompare(b.namespace)))
    .map((l) => ({ ...l, endsAt: fetchedAt + l.ttlRemainingMs }));
}

function parseMetrics(text) {
  const lost = {};
  let storeUp = null;
  let storeKind = '';
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const [, name, labels = '', value] = m;
    const label = (n) => (new RegExp(`${n}="([^"]*)"`).exec(labels) || [])[1] || '';
    if (name === 'keyholder_lost_leases_total') lost[label('operation')] = Number(value);
    if (name === 'keyholder_store_up') {
      storeUp = Number(value) === 1;
      storeKind = label('store');
    }
  }
  return { lost, storeUp, storeKind };
}

async function refreshMetrics() {
  try {
    const res = await fetch('/metrics', { cache: 'no-store' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const { lost, storeUp, storeKind } = parseMetrics(await res.text());
    const up = $('store-up');
    up.textContent = storeUp === null ? 'unknown' : `${storeUp ? 'up' : 'DOWN'} (${storeKind})`;
    up.className = `value ${storeUp ? 'up' : 'down'}`;
    const total = Object.values(lost).reduce((a, b) => a + b, 0);
    $('lost-leases').textContent = String(total);
    $('lost-leases').className = `value ${total > 0 ? 'warn' : ''}`;
    $('lost-detail').textContent = Object.entries(lost).map(([op, n]) => `${op} ${n}`).join(' · ');
  } catch {
    $('store-up').textContent = 'metrics unavailable';
    $('store-up').className = 'value';
  }
}

function formatMs(ms) {
  if (ms <= 0) return 'expired';
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 120) return `${min} min ${s % 60} s`;
  return `${Math.floor(min / 60)} h ${min % 60} min`;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function render() {
  const tbody = $('locks').querySelector('tbody');
  const rows = [];
  let namespace = null;
  for (const lock of state.rows) {
    if (lock.namespace !== namespace) {
      namespace = lock.namespace;
      const tr = document.createElement('tr');
      tr.className = 'namespace-row';
      const td = cell(`${namespace} (${state.rows.filter((l) => l.namespace === namespace).length})`);
      td.colSpan = 7;
      tr.append(td);
      rows.push(tr);
    }
    const tr = document.createElement('tr');
    tr.dataset.namespace = lock.namespace;
    tr.dataset.key = lock.key;
    const holder = cell(lock.holder ?? 'no label', lock.holder ? '' : 'none');
    const ttl = cell(formatMs(lock.endsAt - performance.now()), 'num ttl');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'danger small';
    button.textContent = 'Force-release';
    button.setAttribute('aria-label', `Force-release ${lock.namespace}/${lock.key}`);
    button.addEventListener('click', () => confirmRelease(lock));
    const actions = document.createElement('td');
    actions.append(button);
    tr.append(cell(lock.namespace), cell(lock.key, 'key'), holder, cell(String(lock.fencingToken), 'num'), ttl, cell(String(lock.waiters), 'num'), actions);
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
  $('held-count').textContent = String(state.rows.length);
  $('waiting-count').textContent = String(state.rows.reduce((n, l) => n + l.waiters, 0));
  $('empty').hidden = state.rows.length > 0;
  $('empty-filter').textContent = state.namespace || state.prefix ? ' that matches the filter' : '';
}

/** Counts the time left down between refreshes, from each lock's end on this page's clock. */
function tick() {
  const now = performance.now();
  for (const tr of $('locks').querySelectorAll('tbody tr[data-key]')) {
    const lock = state.rows.find((l) => l.namespace === tr.dataset.namespace && l.key === tr.dataset.key);
    if (!lock) continue;
    const left = lock.endsAt - now;
    const td = tr.querySelector('td.ttl');
    td.textContent = formatMs(left);
    tr.classList.toggle('expiring', left < 5000);
  }
}

async function refresh() {
  clearTimeout(state.timer);
  try {
    const [rows] = await Promise.all([listLocks(), refreshMetrics()]);
    state.rows = rows;
    showMain();
    render();
    $('list-error').textContent = '';
    $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (err instanceof Unauthorized) return showLogin(apiKey() ? `That key was refused: ${err.message}` : '');
    $('list-error').textContent = `Could not list locks: ${err.message}`;
  }
  state.timer = setTimeout(refresh, REFRESH_MS);
}

function confirmRelease(lock) {
  state.pending = lock;
  $('confirm-lock').textContent = `${lock.namespace} / ${lock.key}`;
  $('confirm-holder').textContent = lock.holder ?? 'no label';
  $('confirm-token').textContent = String(lock.fencingToken);
  $('confirm').showModal();
}

async function forceRelease(lock) {
  const params = new URLSearchParams({ namespace: lock.namespace });
  try {
    const res = await api('DELETE', `/v1/locks/${encodeURIComponent(lock.key)}?${params}`);
    const body = await res.json().catch(() => ({}));
    if (res.ok) $('notice').textContent = `Released ${lock.namespace}/${lock.key} (fencing token ${body.evicted.fencingToken}).`;
    else if (res.status === 404) $('notice').textContent = `${lock.namespace}/${lock.key} was no longer held.`;
    else $('list-error').textContent = `Force-release failed: ${body.detail || `HTTP ${res.status}`}`;
  } catch (err) {
    if (err instanceof Unauthorized) return showLogin(err.message);
    $('list-error').textContent = `Force-release failed: ${err.message}`;
  }
  await refresh();
}

$('confirm').addEventListener('close', () => {
  const lock = state.pending;
  state.pending = null;
  if (lock && $('confirm').returnValue === 'release') void forceRelease(lock);
});

$('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const key = $('api-key').value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY_STORAGE, key);
  $('api-key').value = '';
  void refresh();
});

$('forget-key').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_STORAGE);
  state.rows = [];
  render();
  showLogin('Key forgotten.');
});

$('filter').addEventListener('submit', (event) => {
  event.preventDefault();
  state.namespace = $('namespace').value.trim();
  state.prefix = $('prefix').value.trim();
  void refresh();
});

$('clear-filter').addEventListener('click', () => {
  $('namespace').value = '';
  $('prefix').value = '';
  state.namespace = '';
  state.prefix = '';
  void refresh();
});

setInterval(tick, 250);
void refresh();
