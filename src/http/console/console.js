/* global document, sessionStorage, fetch, performance, setTimeout, setInterval, clearTimeout, URLSearchParams, Option */
// The operator console: held locks, semaphores and read/write locks (admin API), a conditional
// force release, and two figures from /metrics. Plain browser JavaScript, no build step and no
// third-party code. Everything shown is set with textContent: lock keys and holder labels come from
// API callers and are never parsed as HTML.
'use strict';

const KEY_STORAGE = 'keyholder.adminKey';
/** 2 s: live enough to watch a hand-over, light enough (one page per kind per refresh) for a busy store. */
const REFRESH_MS = 2000;
/**
 * Keys per page. The page asks the store for one page at a time (the cursor is the store's), so
 * 10,000 held leases cost what 100 do: a store walk of one page and a few hundred rows in the DOM.
 * A semaphore key can show up to 100 leases, so its pages hold fewer keys.
 */
const PAGE_KEYS = { locks: 100, semaphores: 20, rwlocks: 20 };
const KINDS = ['locks', 'semaphores', 'rwlocks'];
/**
 * Fencing tokens are floored at the store clock in microseconds (domain/fencing.ts): within this of the
 * store's now, a token dates its grant.
 */
const TOKEN_DATES_WITHIN_MS = 366 * 24 * 3600 * 1000;

const $ = (id) => document.getElementById(id);
const state = {
  kind: 'locks',
  namespace: '',
  prefix: '',
  /** The store cursors of the pages seen so far on this kind and filter; cursors[i] opens page i. */
  cursors: [undefined],
  page: 0,
  nextCursor: null,
  leases: [],
  waiting: 0,
  namespaces: new Set(),
  timer: undefined,
  /** Bumped by every refresh: an answer that arrives after a newer refresh began is dropped. */
  generation: 0,
  pending: null,
  /** The last listing answered 503: the rows (if any) are from an earlier answer. */
  storeDown: false,
  /** Set by a page change: the list is scrolled back to its top once the new page is on it. */
  scrollToTop: false,
  /** When this page first saw each lease (kind, namespace, key, fencing token): a hold time where the token does not date the grant. */
  firstSeen: new Map(),
  /** The key whose queue and history are open ({ kind, namespace, key }), or null. Reloaded with every refresh. */
  detail: null,
  /** Bumped by every detail load: an answer for another key, or an older one, is dropped. */
  detailGeneration: 0,
};

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

class Unauthorized extends Error {}
/** The admin API answered 503: the store (or this instance) cannot answer now. */
class StoreDown extends Error {}
/** No answer at all: the network between this browser and keyholder failed (fetch rejected). */
class Unreachable extends Error {}

async function api(method, path) {
  const headers = {};
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  let res;
  try {
    res = await fetch(path, { method, headers, cache: 'no-store' });
  } catch (err) {
    throw new Unreachable(err.message);
  }
  if (res.status === 401 || res.status === 403) {
    const problem = await res.json().catch(() => ({}));
    throw new Unauthorized(problem.detail || `HTTP ${res.status}`);
  }
  if (res.status === 503) {
    const problem = await res.json().catch(() => ({}));
    throw new StoreDown(`${problem.detail || 'no answer'} (${problem.code || 'HTTP 503'})`);
  }
  return res;
}

function showLogin(message) {
  clearTimeout(state.timer);
  $('main').hidden = true;
  $('store-banner').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('api-key').focus();
}

function showMain() {
  $('login').hidden = true;
  $('main').hidden = false;
}

function listParams(kind, cursor, limit) {
  const params = new URLSearchParams({ limit: String(limit) });
  if (state.namespace) params.set('namespace', state.namespace);
  // The API matches a prefix inside one namespace; across all namespaces the page filters its rows.
  if (state.namespace && state.prefix) params.set('prefix', state.prefix);
  if (cursor) params.set('cursor', cursor);
  return params;
}

/** One page of `kind` from the admin API: { entries, nextCursor }. */
async function listPage(kind, cursor, limit) {
  const res = await api('GET', `/v1/${kind}?${listParams(kind, cursor, limit)}`);
  const body = await res.json();
  if (!res.ok) throw new Error(body.detail || `HTTP ${res.status}`);
  return { entries: kind === 'locks' ? body.locks : body.entries, nextCursor: body.nextCursor };
}

/**
 * Store pages one console page may walk to find a row: a store page can hold no live lease and still not
 * be the last (Redis SCAN and etcd walk the records a released key leaves for its fencing grace; a key
 * prefix over all namespaces is filtered here, as the API takes none). Up to this many, until one has a
 * row, so that a page says "nothing is held" only when the store says so.
 */
const WALK_PAGES = 10;

/** The page the list shows: the store's page at the cursor, walked on past store pages with nothing to show. */
async function currentPage(kind) {
  const prefix = state.namespace ? '' : state.prefix;
  const shown = (page) => (prefix ? page.entries.filter((e) => e.key.startsWith(prefix)) : page.entries);
  let page = await listPage(kind, state.cursors[state.page], PAGE_KEYS[kind]);
  const entries = shown(page);
  for (let walked = 1; entries.length === 0 && page.nextCursor && walked < WALK_PAGES; walked++) {
    page = await listPage(kind, page.nextCursor, PAGE_KEYS[kind]);
    entries.push(...shown(page));
  }
  return { ...page, entries };
}

/** The rows of one page: one per lease (a semaphore or read/write lock key has several). */
function leasesOf(kind, entries, fetchedAt) {
  const rows = [];
  const seen = new Set();
  for (const entry of entries) {
    // The Redis store may show a key on two pages, or twice on one: keep one.
    const id = `${entry.namespace}\u0000${entry.key}`;
    if (seen.has(id)) continue;
    seen.add(id);
    state.namespaces.add(entry.namespace);
    if (state.prefix && !entry.key.startsWith(state.prefix)) continue;
    const holders = kind === 'locks' ? [entry] : entry.holders;
    holders.forEach((h, i) => {
      rows.push({
        kind,
        namespace: entry.namespace,
        key: entry.key,
        holder: h.holder,
        fencingToken: h.fencingToken,
        what: kindLabel(kind, entry, h),
        // The store's clock at the answer, without the browser's: expiry minus the time left.
        storeNowMs: Date.parse(h.expiresAt) - h.ttlRemainingMs,
        endsAt: fetchedAt + h.ttlRemainingMs,
        fetchedAt,
        waiters: i === 0 ? entry.waiters : null,
        more: i === holders.length - 1 && kind !== 'locks' && entry.truncated ? entry.holderCount - holders.length : 0,
      });
    });
  }
  return rows;
}

function kindLabel(kind, entry, holder) {
  if (kind === 'locks') return 'lock';
  if (kind === 'semaphores') return `semaphore ${entry.holderCount}/${entry.capacity}`;
  return holder.weight >= entry.capacity ? 'rwlock write' : 'rwlock read';
}

/**
 * How long a lease has been held, at this page's now. A token floored at the store clock (memory,
 * Redis) dates its grant to the microsecond, at the latest; elsewhere (etcd) the page can only say
 * since when it has seen the lease ("≥").
 */
function heldFor(lease, now) {
  const sinceAnswer = now - lease.fetchedAt;
  const grantedMs = lease.fencingToken / 1000;
  if (grantedMs <= lease.storeNowMs + 1000 && grantedMs >= lease.storeNowMs - TOKEN_DATES_WITHIN_MS) {
    return formatMs(Math.max(0, lease.storeNowMs - grantedMs + sinceAnswer));
  }
  const id = `${lease.kind}\u0000${lease.namespace}\u0000${lease.key}\u0000${lease.fencingToken}`;
  let first = state.firstSeen.get(id);
  if (first === undefined) {
    first = lease.fetchedAt;
    state.firstSeen.set(id, first);
  }
  return `≥ ${formatMs(now - first)}`;
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
    $('lost-detail').textContent = Object.entries(lost)
      .map(([op, n]) => `${op} ${n}`)
      .join(' · ');
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
  const h = Math.floor(min / 60);
  if (h < 48) return `${h} h ${min % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** A cell; `label` is shown before the value where the table folds into cards (narrow screens). */
function cell(text, label, className) {
  const td = document.createElement('td');
  td.textContent = text;
  td.dataset.label = label;
  if (className) td.className = className;
  return td;
}

/** The rendered rows' cells that count down, so a tick touches only what is on the page. */
let ticking = [];

function render() {
  const tbody = $('leases').querySelector('tbody');
  const fragment = document.createDocumentFragment();
  const now = performance.now();
  ticking = [];
  for (const lease of state.leases) {
    const tr = document.createElement('tr');
    tr.dataset.kind = lease.kind;
    tr.dataset.namespace = lease.namespace;
    tr.dataset.key = lease.key;
    tr.dataset.fencingToken = String(lease.fencingToken);
    if (isDetail(lease)) tr.classList.add('selected');
    const holder = cell(lease.holder ?? 'no label', 'holder', lease.holder ? 'holder' : 'holder none');
    if (lease.more > 0)
      holder.append(
        document.createElement('br'),
        Object.assign(document.createElement('small'), { textContent: `+${lease.more} more not shown` }),
      );
    const held = cell(heldFor(lease, now), 'held for', 'num held');
    const ttl = cell(formatMs(lease.endsAt - now), 'time left', 'num ttl');
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'danger small';
    button.textContent = 'Force-release';
    button.setAttribute('aria-label', `Force-release ${lease.namespace}/${lease.key} (fencing token ${lease.fencingToken})`);
    button.addEventListener('click', () => confirmRelease(lease));
    const actions = document.createElement('td');
    actions.className = 'actions';
    actions.append(button);
    tr.append(
      cell(lease.what, 'kind', 'kind'),
      cell(lease.namespace, 'namespace'),
      keyCell(lease),
      holder,
      cell(String(lease.fencingToken), 'fencing token', 'num'),
      held,
      ttl,
      cell(lease.waiters === null ? '' : String(lease.waiters), 'waiters', 'num waiters'),
      actions,
    );
    fragment.append(tr);
    ticking.push({ tr, lease, held, ttl });
  }
  tbody.replaceChildren(fragment);
  // For the console's tests and an operator's devtools: when the first rows were on the page.
  if (state.leases.length > 0 && performance.getEntriesByName('keyholder:first-rows').length === 0)
    performance.mark('keyholder:first-rows');
  $('held-count').textContent = String(state.leases.length);
  $('waiting-count').textContent = String(state.waiting);
  $('empty').hidden = state.leases.length > 0;
  $('empty').textContent = state.storeDown
    ? 'Nothing to show: the store did not answer.'
    : state.nextCursor
      ? `Nothing on this page${state.namespace || state.prefix ? ' matches the filter' : ''}; the next pages may hold more.`
      : `Nothing is held${state.namespace || state.prefix ? ' that matches the filter' : ''}.`;
  if (state.scrollToTop) {
    state.scrollToTop = false;
    $('leases').scrollIntoView({ block: 'start' });
  }
  $('prev-page').disabled = state.page === 0;
  $('next-page').disabled = !state.nextCursor;
  $('page-label').textContent = `page ${state.page + 1}`;
  renderNamespaces();
}

/** The key, as a button that opens its queue and history. */
function keyCell(lease) {
  const td = cell('', 'key', 'key');
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'link';
  button.textContent = lease.key;
  button.setAttribute('aria-label', `Queue and history of ${lease.namespace}/${lease.key}`);
  button.addEventListener('click', () => openDetail(lease));
  td.append(button);
  return td;
}

const isDetail = (lease) =>
  state.detail !== null && state.detail.kind === lease.kind && state.detail.namespace === lease.namespace && state.detail.key === lease.key;

/** Reads a JSON answer of the detail's routes; a 5xx or 4xx is an error with the problem's detail. */
async function detailJson(path) {
  const res = await api('GET', path);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`${body.detail || `HTTP ${res.status}`}${body.code ? ` (${body.code})` : ''}`);
  return body;
}

function openDetail(lease) {
  state.detail = { kind: lease.kind, namespace: lease.namespace, key: lease.key };
  const noun = { locks: 'lock', semaphores: 'semaphore', rwlocks: 'read/write lock' }[lease.kind];
  $('detail-title').textContent = `${noun} ${lease.namespace} / ${lease.key}`;
  $('detail').hidden = false;
  for (const tr of document.querySelectorAll('#leases tbody tr'))
    tr.classList.toggle('selected', tr.dataset.key === lease.key && tr.dataset.namespace === lease.namespace);
  $('detail').scrollIntoView({ block: 'nearest' });
  void loadDetail();
}

function closeDetail() {
  state.detail = null;
  state.detailGeneration++;
  $('detail').hidden = true;
  for (const tr of document.querySelectorAll('#leases tbody tr.selected')) tr.classList.remove('selected');
}

/**
 * The store's clock now, as the listing last read it for this key (expiry minus time left): the
 * queue's "waiting since" is a store time, and the browser's clock may be off.
 */
function storeNow(detail) {
  const lease =
    state.leases.find((l) => l.kind === detail.kind && l.namespace === detail.namespace && l.key === detail.key) ?? state.leases[0];
  return lease ? lease.storeNowMs + (performance.now() - lease.fetchedAt) : Date.now();
}

/** The open key's queue (GET /v1/queue/...) and history (GET /v1/history/...), both admin routes, read together. */
async function loadDetail() {
  const detail = state.detail;
  if (!detail) return;
  const generation = ++state.detailGeneration;
  const where = `${detail.kind}/${encodeURIComponent(detail.key)}?namespace=${encodeURIComponent(detail.namespace)}`;
  const [queue, history] = await Promise.allSettled([detailJson(`/v1/queue/${where}`), detailJson(`/v1/history/${where}&limit=200`)]);
  if (generation !== state.detailGeneration) return;
  for (const r of [queue, history]) if (r.status === 'rejected' && r.reason instanceof Unauthorized) return showLogin(r.reason.message);
  const errors = [queue, history].filter((r) => r.status === 'rejected').map((r) => r.reason.message);
  $('detail-error').textContent = errors.length > 0 ? `Could not read: ${[...new Set(errors)].join('; ')}` : '';
  if (queue.status === 'fulfilled') renderQueue(queue.value.queue, storeNow(detail), detail);
  if (history.status === 'fulfilled') renderTimeline(history.value, storeNow(detail));
}

/** What a queued caller asks for, in its primitive's words. */
function asksFor(kind, q) {
  if (kind === 'locks') return 'the lock';
  if (kind === 'rwlocks') return q.mode === 'write' ? 'write (all of it)' : 'read';
  return q.weight === 1 ? '1 permit' : `${q.weight} permits`;
}

function renderQueue(queue, now, detail) {
  const rows = queue.map((q) => {
    const tr = document.createElement('tr');
    const since = Date.parse(q.waitingSince);
    tr.append(
      cell(String(q.position), 'position', 'num'),
      cell(q.holder ?? 'no label', 'holder', q.holder ? 'holder' : 'holder none'),
      cell(formatTime(since), 'waiting since'),
      cell(formatMs(Math.max(1, now - since)), 'waiting for', 'num'),
      cell(asksFor(detail.kind, q), 'asks for'),
    );
    return tr;
  });
  $('queue')
    .querySelector('tbody')
    .replaceChildren(...rows);
  $('queue').hidden = rows.length === 0;
  $('queue-empty').hidden = rows.length > 0;
  $('queue-count').textContent = rows.length === 0 ? '' : rows.length === 100 ? '(first 100)' : `(${rows.length})`;
}

/** A store time as the operator reads it: the time of day today, the date too before today. */
function formatTime(ms) {
  const d = new Date(ms);
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

/**
 * The history's events (oldest first) as one entry per lease (its fencing token), newest first: who
 * held the key, from when to when, how the lease began (granted, or handed over after a wait) and how
 * it ended (released, expired, force-released by whom), or that it is still held.
 */
function leasesFromEvents(events) {
  const byToken = new Map();
  const leases = [];
  for (const e of events) {
    let lease = e.fencingToken === null ? undefined : byToken.get(e.fencingToken);
    if (!lease) {
      lease = { fencingToken: e.fencingToken, holder: e.holder, mode: e.mode, renewals: 0 };
      if (e.fencingToken !== null) byToken.set(e.fencingToken, lease);
      leases.push(lease);
    }
    if (e.type === 'granted' || e.type === 'handed_over') {
      lease.start = e;
      lease.expiresAt = e.expiresAt;
    } else if (e.type === 'renewed') {
      lease.renewals++;
      lease.expiresAt = e.expiresAt;
    } else if (e.type === 'lock_delay') {
      lease.lockDelayUntil = e.until;
    } else if (e.type === 'release_requested') {
      // An ask, not an end: the lease goes on until it is released, evicted or expires.
      lease.releaseRequested = e;
    } else {
      lease.end = e;
    }
  }
  return leases.reverse();
}

function began(lease) {
  if (!lease.start) return 'before the kept history';
  const how = lease.start.type === 'handed_over' ? 'handed over' : 'granted';
  const parts = [how];
  if (lease.start.waitedMs > 0) parts.push(`after waiting ${formatMs(Math.max(1, lease.start.waitedMs))}`);
  if (lease.start.lockSet) parts.push('(lock set)');
  if (lease.renewals > 0) parts.push(`· renewed ${lease.renewals}×`);
  return parts.join(' ');
}

/** Still held at `now`: no recorded end, and its last known expiry is ahead. */
const stillHeld = (lease, now) => !lease.end && Date.parse(lease.expiresAt ?? '') > now;

function ended(lease, now) {
  const end = lease.end;
  const ask = lease.releaseRequested;
  const asked = ask ? ` · asked to let go by ${ask.by ?? 'an operator'}${ask.reason ? `: ${ask.reason}` : ''}` : '';
  if (!end) return (stillHeld(lease, now) ? 'still held' : 'not recorded') + asked;
  if (end.type === 'released') return `released${asked}`;
  if (end.type === 'force_released') return `force-released by ${end.by ?? 'an operator'}${asked}`;
  const delay = lease.lockDelayUntil ? `; lock-delay until ${formatTime(Date.parse(lease.lockDelayUntil))}` : '';
  return `expired (never released)${delay}${asked}`;
}

function renderTimeline(history, now) {
  const off = history.recording === false;
  $('history-off').hidden = !off;
  $('history-off').textContent = off
    ? 'History is off on this instance (HISTORY=off, the default): no lease events are recorded, so there is no timeline ' +
      'for this key. Turn it on with HISTORY=on (see "Lease history" in docs/operations.md for its cost).'
    : '';
  const leases = off ? [] : leasesFromEvents(history.events);
  const rows = leases.map((lease) => {
    const tr = document.createElement('tr');
    const from = lease.start ? formatTime(Date.parse(lease.start.at)) : '…';
    const end = ended(lease, now);
    const live = stillHeld(lease, now);
    const heldMs = lease.end?.heldMs ?? (live && lease.start ? now - Date.parse(lease.start.at) : undefined);
    const holder = (lease.holder ?? 'no label') + (lease.mode ? ` (${lease.mode})` : '');
    tr.append(
      cell(from, 'from'),
      cell(lease.end ? formatTime(Date.parse(lease.end.at)) : live ? 'now' : '…', 'to'),
      cell(holder, 'holder', lease.holder ? 'holder' : 'holder none'),
      cell(lease.fencingToken === null ? '?' : String(lease.fencingToken), 'fencing token', 'num'),
      cell(began(lease), 'how it began'),
      cell(end, 'how it ended', live ? 'live' : lease.end?.type === 'force_released' ? 'forced' : ''),
      cell(heldMs === undefined ? '' : formatMs(Math.max(1, heldMs)), 'held for', 'num'),
    );
    return tr;
  });
  $('timeline')
    .querySelector('tbody')
    .replaceChildren(...rows);
  $('timeline').hidden = rows.length === 0;
  $('timeline-empty').hidden = off || rows.length > 0;
  $('timeline-empty').textContent = 'No lease of this key is recorded in the kept history.';
  $('timeline-count').textContent =
    rows.length === 0 ? '' : `(${rows.length} lease${rows.length === 1 ? '' : 's'}${history.truncated ? ', older ones not shown' : ''})`;
}

/** The namespace picker's choices: every namespace this page has seen in a listing (any other can be typed). */
function renderNamespaces() {
  const list = $('namespaces');
  if (list.options.length === state.namespaces.size) return;
  list.replaceChildren(...[...state.namespaces].sort().map((ns) => new Option(ns, ns)));
}

/** Counts the time left down (and the hold time up) between refreshes, on the rendered rows only. */
function tick() {
  const now = performance.now();
  for (const { tr, lease, held, ttl } of ticking) {
    const left = lease.endsAt - now;
    ttl.textContent = formatMs(left);
    held.textContent = heldFor(lease, now);
    tr.classList.toggle('expiring', left < 5000);
  }
}

function renderCounts(counts) {
  for (const kind of KINDS) {
    const c = counts[kind];
    $(`count-${kind}`).textContent = c === undefined ? '' : `${c.keys}${c.more ? '+' : ''}`;
  }
}

function showStoreDown(message) {
  state.storeDown = true;
  if (state.leases.length === 0) $('empty').textContent = 'Nothing to show: the store did not answer.';
  const banner = $('store-banner');
  banner.textContent =
    `The lock store is not answering: ${message}. Nothing can be listed or released right now; ` +
    `this page retries every ${REFRESH_MS / 1000} s.` +
    (state.leases.length > 0 ? ' The rows below are from the last answer.' : '');
  banner.hidden = false;
  $('leases').classList.add('stale');
}

function storeAnswered() {
  state.storeDown = false;
  $('store-banner').hidden = true;
  $('leases').classList.remove('stale');
}

async function refresh() {
  clearTimeout(state.timer);
  const kind = state.kind;
  const generation = ++state.generation;
  try {
    const current = currentPage(kind);
    // The other tabs' counts: the first page of each, as the tabs show "100+" when there is more.
    const others = KINDS.filter((k) => k !== kind).map(async (k) => [k, await listPage(k, undefined, PAGE_KEYS[k])]);
    const [page, ...rest] = await Promise.all([current, ...others, refreshMetrics()]);
    if (generation !== state.generation) return;
    const fetchedAt = performance.now();
    const counts = Object.fromEntries(
      rest.filter(Array.isArray).map(([k, p]) => [k, { keys: p.entries.length, more: p.nextCursor !== null }]),
    );
    counts[kind] = { keys: page.entries.length, more: page.nextCursor !== null };
    for (const [, p] of rest.filter(Array.isArray)) for (const e of p.entries) state.namespaces.add(e.namespace);
    state.leases = leasesOf(kind, page.entries, fetchedAt);
    state.waiting = page.entries.reduce((n, e) => n + e.waiters, 0);
    state.nextCursor = page.nextCursor;
    showMain();
    storeAnswered();
    render();
    renderCounts(counts);
    $('list-error').textContent = '';
    $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
    // The open key's queue and history follow the list (the queue changes as fast as the holders).
    void loadDetail();
  } catch (err) {
    if (generation !== state.generation) return;
    if (err instanceof Unauthorized) return showLogin(apiKey() ? `That key was refused: ${err.message}` : '');
    if (err instanceof StoreDown) {
      // The key was accepted (a refused key is a 401/403): the operator sees the console and why it is empty.
      showMain();
      render();
      showStoreDown(err.message);
    } else if (err instanceof Unreachable) {
      // Not the store's fault, nor the key's: the rows on screen are the last answer's, and look it.
      $('leases').classList.add('stale');
      $('list-error').textContent =
        `Could not reach keyholder (${err.message}). ` +
        (state.leases.length > 0 ? 'The rows below are from the last answer; ' : '') +
        `this page retries every ${REFRESH_MS / 1000} s.`;
    } else {
      $('list-error').textContent = `Could not list: ${err.message}`;
    }
  }
  state.timer = setTimeout(refresh, REFRESH_MS);
}

function confirmRelease(lease) {
  state.pending = lease;
  $('confirm-kind').textContent = lease.what;
  $('confirm-lock').textContent = `${lease.namespace} / ${lease.key}`;
  $('confirm-holder').textContent = lease.holder ?? 'no label';
  $('confirm-token').textContent = String(lease.fencingToken);
  $('confirm').showModal();
}

/**
 * Evicts the lease the dialog showed, named by its fencing token: the server frees it only if that
 * lease is still live, in one atomic step, so a holder that took the key since this page looked keeps it.
 */
async function forceRelease(lease) {
  const params = new URLSearchParams({ namespace: lease.namespace, fencingToken: String(lease.fencingToken) });
  const name = `${lease.namespace}/${lease.key}`;
  $('notice').className = 'notice';
  try {
    const res = await api('DELETE', `/v1/${lease.kind}/${encodeURIComponent(lease.key)}?${params}`);
    const body = await res.json().catch(() => ({}));
    if (res.ok) {
      $('notice').textContent = `Released ${name} (fencing token ${lease.fencingToken}).`;
    } else if (res.status === 409 && body.code === 'holder_changed') {
      $('notice').className = 'notice warn';
      $('notice').textContent =
        `Not released: ${name} changed hands after this page showed it (fencing token ${lease.fencingToken}). ` +
        'Nothing was changed; the list now shows who holds it.';
    } else if (res.status === 404) {
      $('notice').textContent = `${name} was no longer held (fencing token ${lease.fencingToken} had ended); nothing was released.`;
    } else {
      $('list-error').textContent = `Force-release failed: ${body.detail || `HTTP ${res.status}`}`;
    }
  } catch (err) {
    if (err instanceof Unauthorized) return showLogin(err.message);
    if (err instanceof StoreDown) showStoreDown(err.message);
    else $('list-error').textContent = `Force-release failed: ${err.message}`;
  }
  await refresh();
}

/** Back to the first page: the cursors belong to one kind and one filter. */
function firstPage() {
  state.cursors = [undefined];
  state.page = 0;
  state.nextCursor = null;
}

$('confirm').addEventListener('close', () => {
  const lease = state.pending;
  state.pending = null;
  if (lease && $('confirm').returnValue === 'release') void forceRelease(lease);
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
  // An answer still on its way (the list, a key's view) was asked for with the forgotten key: dropped.
  state.generation++;
  closeDetail();
  state.leases = [];
  render();
  showLogin('Key forgotten.');
});

for (const tab of document.querySelectorAll('[role="tab"]')) {
  tab.addEventListener('click', () => {
    state.kind = tab.dataset.kind;
    for (const t of document.querySelectorAll('[role="tab"]')) t.setAttribute('aria-selected', String(t === tab));
    state.leases = [];
    closeDetail();
    firstPage();
    render();
    void refresh();
  });
}

$('close-detail').addEventListener('click', closeDetail);

$('next-page').addEventListener('click', () => {
  if (!state.nextCursor) return;
  state.cursors[state.page + 1] = state.nextCursor;
  state.page += 1;
  state.scrollToTop = true;
  void refresh();
});

$('prev-page').addEventListener('click', () => {
  if (state.page === 0) return;
  state.page -= 1;
  state.scrollToTop = true;
  void refresh();
});

$('filter').addEventListener('submit', (event) => {
  event.preventDefault();
  state.namespace = $('namespace').value.trim();
  state.prefix = $('prefix').value.trim();
  firstPage();
  void refresh();
});

// A namespace picked from the list (or typed and left) applies at once.
$('namespace').addEventListener('change', () => {
  state.namespace = $('namespace').value.trim();
  state.prefix = $('prefix').value.trim();
  firstPage();
  void refresh();
});

$('clear-filter').addEventListener('click', () => {
  $('namespace').value = '';
  $('prefix').value = '';
  state.namespace = '';
  state.prefix = '';
  firstPage();
  void refresh();
});

setInterval(tick, 250);
void refresh();
