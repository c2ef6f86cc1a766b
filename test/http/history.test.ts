import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Lease history over HTTP, on the embedded store: every primitive's events as the routes record them,
 * the derived ones (handed over, expired, lock-delay), who force-released, the time range, and who may
 * read which key. The stores' part (what is kept, and for how long) is the history contract
 * (test/conformance/history.contract.ts).
 */
const keys = makeKeys([
  { id: 'locker', namespace: 'team-a', scopes: ['locks'] },
  { id: 'other', namespace: 'team-b', scopes: ['locks'] },
  { id: 'operator', namespace: 'ops', scopes: ['admin'] },
]);
type Who = 'locker' | 'other' | 'operator';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() } });
});
afterAll(async () => {
  await t.close();
});

async function call(who: Who, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) {
  const res = await t.app.inject({ method, url, headers: bearer(keys.plain[who] ?? ''), ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
}

interface Event {
  type: string;
  at: string;
  fencingToken: number | null;
  holder: string | null;
  waitedMs?: number;
  heldMs?: number;
  by?: string;
  reason?: string | null;
  until?: string;
  mode?: string;
  lockSet?: true;
}
async function historyOf(path: string, query = '', who: Who = 'locker'): Promise<Event[]> {
  const res = await call(who, 'GET', `${path}/history${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.events as Event[];
}
const types = (events: Event[]) => events.map((e) => e.type);

let n = 0;
const fresh = (name: string) => `${name}-${++n}`;

describe('lock history', () => {
  it('grant, renew, release: holder, fencing token and how long it was held; never the owner token', async () => {
    const key = fresh('invoice');
    const grant = await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'billing-1' });
    const { ownerToken, fencingToken } = grant.body as { ownerToken: string; fencingToken: number };
    expect((await call('locker', 'POST', `/v1/locks/${key}/renew`, { ownerToken, ttlMs: 30_000 })).status).toBe(200);
    expect((await call('locker', 'POST', `/v1/locks/${key}/release`, { ownerToken })).status).toBe(200);
    const res = await call('locker', 'GET', `/v1/locks/${key}/history`);
    expect(JSON.stringify(res.body)).not.toContain(ownerToken);
    const events = res.body.events as Event[];
    expect(types(events)).toEqual(['granted', 'renewed', 'released']);
    expect(events.every((e) => e.fencingToken === fencingToken && e.holder === 'billing-1')).toBe(true);
    expect(events[2]?.heldMs).toBeGreaterThanOrEqual(0);
    expect(res.body.truncated).toBe(false);
  });

  it('a waiter granted when the holder releases is handed_over, with how long it waited', async () => {
    const key = fresh('handover');
    const first = await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'first' });
    const waiting = call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'second', waitMs: 20_000 });
    // Released once the waiter is queued (the lock's inspect counts it).
    await vi.waitFor(async () => expect((await call('locker', 'GET', `/v1/locks/${key}`)).body.waiters).toBe(1), { timeout: 10_000 });
    await call('locker', 'POST', `/v1/locks/${key}/release`, { ownerToken: (first.body as { ownerToken: string }).ownerToken });
    expect((await waiting).status).toBe(200);
    const events = await historyOf(`/v1/locks/${key}`);
    expect(types(events)).toEqual(['granted', 'released', 'handed_over']);
    expect(events[2]?.holder).toBe('second');
    expect(events[2]?.waitedMs).toBeGreaterThan(0);
  });

  it('a lease that ran out is expired at its end, then its lock-delay', async () => {
    const key = fresh('expiry');
    await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 150, holder: 'crashed', lockDelayMs: 1_000 });
    await vi.waitFor(async () => expect(types(await historyOf(`/v1/locks/${key}`))).toEqual(['granted', 'expired', 'lock_delay']), {
      timeout: 10_000,
      interval: 50,
    });
    const [granted, expired, delay] = await historyOf(`/v1/locks/${key}`);
    expect(Date.parse(expired?.at ?? '') - Date.parse(granted?.at ?? '')).toBe(150);
    expect(expired?.heldMs).toBe(150);
    expect(Date.parse(delay?.until ?? '') - Date.parse(expired?.at ?? '')).toBe(1_000);
  });

  it('a force release names the API key that did it', async () => {
    const key = fresh('stuck');
    await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'stuck-worker' });
    expect((await call('operator', 'DELETE', `/v1/locks/${key}?namespace=team-a`)).status).toBe(200);
    const events = await historyOf(`/v1/locks/${key}`);
    expect(types(events)).toEqual(['granted', 'force_released']);
    expect(events[1]).toMatchObject({ by: 'operator', holder: 'stuck-worker' });
  });

  it('a release request is an event of the lease it asked, with who and why; the lease goes on', async () => {
    const key = fresh('asked');
    const grant = (await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'busy-worker' })).body as {
      fencingToken: number;
      ownerToken: string;
    };
    const asked = await call('operator', 'POST', `/v1/locks/${key}/release-request?namespace=team-a`, {
      fencingToken: grant.fencingToken,
      reason: 'deploy',
    });
    expect(asked.status).toBe(200);
    expect((await call('locker', 'POST', `/v1/locks/${key}/release`, { ownerToken: grant.ownerToken })).status).toBe(200);
    await vi.waitFor(async () => expect(types(await historyOf(`/v1/locks/${key}`))).toEqual(['granted', 'release_requested', 'released']), {
      timeout: 10_000,
      interval: 50,
    });
    const [granted, request, released] = await historyOf(`/v1/locks/${key}`);
    expect(request).toMatchObject({ by: 'operator', reason: 'deploy', holder: 'busy-worker', fencingToken: grant.fencingToken });
    // The request ended nothing: the lease is held from its grant to its release.
    expect(released?.heldMs).toBe(Date.parse(released?.at ?? '') - Date.parse(granted?.at ?? ''));
  });

  it('since/until keep the leases live in the range, and the events in it', async () => {
    const key = fresh('range');
    const a = await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'a' });
    await call('locker', 'POST', `/v1/locks/${key}/release`, { ownerToken: (a.body as { ownerToken: string }).ownerToken });
    const all = await historyOf(`/v1/locks/${key}`);
    const releasedAt = all[1]?.at ?? '';
    const mid = new Date(Date.parse(all[0]?.at ?? '') + 0).toISOString();
    // A range that starts as the lease began keeps the grant and its release.
    expect(types(await historyOf(`/v1/locks/${key}`, `?since=${mid}&until=${releasedAt}`))).toEqual(['granted', 'released']);
    // A range after the release: nothing.
    const later = new Date(Date.parse(releasedAt) + 60_000).toISOString();
    expect(await historyOf(`/v1/locks/${key}`, `?since=${later}`)).toEqual([]);
    expect((await call('locker', 'GET', `/v1/locks/${key}/history?since=${later}&until=${releasedAt}`)).status).toBe(400);
  });

  it('limit keeps the most recent events and says it truncated', async () => {
    const key = fresh('many');
    for (let i = 0; i < 3; i++) {
      const g = await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000 });
      await call('locker', 'POST', `/v1/locks/${key}/release`, { ownerToken: (g.body as { ownerToken: string }).ownerToken });
    }
    const res = await call('locker', 'GET', `/v1/locks/${key}/history?limit=2`);
    expect(types(res.body.events as Event[])).toEqual(['granted', 'released']);
    expect(res.body.truncated).toBe(true);
  });
});

describe('lock sets, semaphores, read/write locks', () => {
  it("a lock set's keys: each key's grant (marked lockSet), renewal and release", async () => {
    const [k1, k2] = [fresh('set'), fresh('set')];
    const g = await call('locker', 'POST', '/v1/lock-sets/acquire', { keys: [k1, k2], ttlMs: 30_000, holder: 'batch' });
    const ownerToken = (g.body as { ownerToken: string }).ownerToken;
    await call('locker', 'POST', '/v1/lock-sets/renew', { keys: [k1, k2], ownerToken, ttlMs: 30_000 });
    await call('locker', 'POST', '/v1/lock-sets/release', { keys: [k1, k2], ownerToken });
    for (const key of [k1, k2]) {
      const events = await historyOf(`/v1/locks/${key}`);
      expect(types(events)).toEqual(['granted', 'renewed', 'released']);
      expect(events[0]?.lockSet).toBe(true);
      expect(events[2]?.holder).toBe('batch');
    }
  });

  it('a semaphore: each permit its own lease; a force release ends them all', async () => {
    const key = fresh('sem');
    const p1 = await call('locker', 'POST', `/v1/semaphores/${key}/acquire`, { limit: 2, ttlMs: 30_000, holder: 'p1' });
    await call('locker', 'POST', `/v1/semaphores/${key}/acquire`, { limit: 2, ttlMs: 30_000, holder: 'p2' });
    await call('locker', 'POST', `/v1/semaphores/${key}/release`, { ownerToken: (p1.body as { ownerToken: string }).ownerToken });
    expect((await call('operator', 'DELETE', `/v1/semaphores/${key}?namespace=team-a`)).status).toBe(200);
    const events = await historyOf(`/v1/semaphores/${key}`);
    expect(events.map((e) => `${e.type}:${e.holder}`)).toEqual(['granted:p1', 'granted:p2', 'released:p1', 'force_released:p2']);
    // A semaphore's history is not the lock's of the same name.
    expect(await historyOf(`/v1/locks/${key}`)).toEqual([]);
  });

  it('a read/write lock: the mode of each lease', async () => {
    const key = fresh('rw');
    const r = await call('locker', 'POST', `/v1/rwlocks/${key}/acquire`, { mode: 'read', ttlMs: 30_000 });
    await call('locker', 'POST', `/v1/rwlocks/${key}/release`, { ownerToken: (r.body as { ownerToken: string }).ownerToken });
    await call('locker', 'POST', `/v1/rwlocks/${key}/acquire`, { mode: 'write', ttlMs: 30_000 });
    const events = await historyOf(`/v1/rwlocks/${key}`);
    expect(events.map((e) => `${e.type}:${e.mode}`)).toEqual(['granted:read', 'released:read', 'granted:write']);
  });
});

describe('who may read a history', () => {
  it("a team reads its own namespace's keys only; an operator any namespace's", async () => {
    const key = fresh('tenant');
    await call('locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'team-a-worker' });
    // team-b's key of the same name is another key: its history is empty.
    expect(await historyOf(`/v1/locks/${key}`, '', 'other')).toEqual([]);
    expect((await call('operator', 'GET', `/v1/locks/${key}/history`)).status).toBe(403);
    const admin = await call('operator', 'GET', `/v1/history/locks/${key}?namespace=team-a`);
    expect(admin.status).toBe(200);
    expect(types(admin.body.events as Event[])).toEqual(['granted']);
    expect((await call('locker', 'GET', `/v1/history/locks/${key}?namespace=team-a`)).status).toBe(403);
  });
});
