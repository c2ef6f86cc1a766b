import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { everyStore } from '../helpers/both-stores.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The operator's view of who waits (GET /v1/queue/{primitive}/{key}?namespace=), as the console shows
 * it: position, holder label, waiting since and the weight or mode asked for, for any namespace's key, on
 * every store (embedded, Redis, etcd, Redis Cluster); with the operator's other lease-by-lease overrides,
 * the conditional force release (DELETE ...?fencingToken=) and the release request, on every primitive.
 * And whether the history routes record at all (recording), so the console can say "history is off".
 */
const STORES = everyStore('aq');
const keys = makeKeys([
  { id: 'locker', namespace: 'team-a', scopes: ['locks'] },
  { id: 'other', namespace: 'team-b', scopes: ['locks'] },
  { id: 'operator', namespace: 'ops', scopes: ['admin'] },
]);
type Who = 'locker' | 'other' | 'operator';
const OPERATOR = bearer(keys.plain.operator ?? '');

let t: TestApp;

async function call(who: Who, method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) {
  const res = await t.app.inject({ method, url, headers: bearer(keys.plain[who] ?? ''), ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
}

interface Queued {
  position: number;
  holder: string | null;
  waitingSince: string;
  weight?: number;
  mode?: string;
}
async function queueOf(path: string, key: string, namespace = 'team-a'): Promise<Queued[]> {
  const res = await call('operator', 'GET', `/v1/queue/${path}/${key}?namespace=${namespace}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body).toMatchObject({ namespace, key });
  return res.body.queue as Queued[];
}

/** Queues a caller that waits up to 30 s; the promise settles when it is granted (or refused). */
function waitFor(path: string, key: string, body: Record<string, unknown>) {
  return call('locker', 'POST', `/v1/${path}/${key}/acquire`, { ttlMs: 30_000, waitMs: 30_000, ...body });
}

describe.each(STORES)('GET /v1/queue/{primitive}/{key} (admin) on the %s store', (_name, openStore) => {
  beforeAll(async () => {
    t = await buildTestApp({ store: await openStore(), auth: { mode: 'keys', keyring: keys.keyring() } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('a lock: its waiters head first with holder label and waiting since; another namespace has its own queue', async () => {
    const held = await call('locker', 'POST', '/v1/locks/q-lock/acquire', { ttlMs: 30_000, holder: 'holder' });
    const before = Date.now();
    const first = waitFor('locks', 'q-lock', { holder: 'w1' });
    await vi.waitFor(async () => expect(await queueOf('locks', 'q-lock')).toHaveLength(1), { timeout: 5_000, interval: 10 });
    const second = waitFor('locks', 'q-lock', {});
    await vi.waitFor(async () => expect(await queueOf('locks', 'q-lock')).toHaveLength(2), { timeout: 5_000, interval: 10 });
    const queue = await queueOf('locks', 'q-lock');
    expect(queue).toEqual([
      { position: 1, holder: 'w1', waitingSince: expect.any(String) },
      { position: 2, holder: null, waitingSince: expect.any(String) },
    ]);
    expect(Date.parse(queue[0]!.waitingSince)).toBeGreaterThanOrEqual(before - 1_000);
    expect(Date.parse(queue[0]!.waitingSince)).toBeLessThanOrEqual(Date.parse(queue[1]!.waitingSince));
    expect(JSON.stringify(queue)).not.toContain('ownerToken');
    // team-b's key of the same name is another key; nobody waits for it.
    expect(await queueOf('locks', 'q-lock', 'team-b')).toEqual([]);

    const { ownerToken } = held.body as { ownerToken: string };
    expect((await call('locker', 'POST', '/v1/locks/q-lock/release', { ownerToken })).status).toBe(200);
    const granted = await first;
    expect(granted.status).toBe(200);
    expect(await queueOf('locks', 'q-lock')).toEqual([{ position: 1, holder: null, waitingSince: queue[1]!.waitingSince }]);
    await call('locker', 'POST', '/v1/locks/q-lock/release', { ownerToken: granted.body.ownerToken });
    expect((await second).status).toBe(200);
    expect(await queueOf('locks', 'q-lock')).toEqual([]);
  });

  it('a read/write lock: the mode each waiter asks for; a semaphore: the weight', async () => {
    const reader = await call('locker', 'POST', '/v1/rwlocks/q-rw/acquire', { mode: 'read', ttlMs: 30_000 });
    const writer = waitFor('rwlocks', 'q-rw', { mode: 'write', holder: 'writer' });
    await vi.waitFor(async () => expect(await queueOf('rwlocks', 'q-rw')).toHaveLength(1), { timeout: 5_000, interval: 10 });
    // A reader queues behind the writer (FIFO), though a read would fit beside the reader that holds it.
    const lateReader = waitFor('rwlocks', 'q-rw', { mode: 'read', holder: 'late-reader' });
    await vi.waitFor(async () => expect(await queueOf('rwlocks', 'q-rw')).toHaveLength(2), { timeout: 5_000, interval: 10 });
    expect((await queueOf('rwlocks', 'q-rw')).map(({ position, holder, mode }) => ({ position, holder, mode }))).toEqual([
      { position: 1, holder: 'writer', mode: 'write' },
      { position: 2, holder: 'late-reader', mode: 'read' },
    ]);

    const permit = await call('locker', 'POST', '/v1/semaphores/q-sem/acquire', { limit: 1, ttlMs: 30_000 });
    const waiter = waitFor('semaphores', 'q-sem', { limit: 1, holder: 'permit-waiter' });
    await vi.waitFor(async () => expect(await queueOf('semaphores', 'q-sem')).toHaveLength(1), { timeout: 5_000, interval: 10 });
    expect(await queueOf('semaphores', 'q-sem')).toEqual([
      { position: 1, holder: 'permit-waiter', waitingSince: expect.any(String), weight: 1 },
    ]);

    // Let everyone through, so nothing waits when the app closes.
    await call('locker', 'POST', '/v1/rwlocks/q-rw/release', { ownerToken: reader.body.ownerToken });
    const w = await writer;
    await call('locker', 'POST', '/v1/rwlocks/q-rw/release', { ownerToken: w.body.ownerToken });
    expect((await lateReader).status).toBe(200);
    await call('locker', 'POST', '/v1/semaphores/q-sem/release', { ownerToken: permit.body.ownerToken });
    expect((await waiter).status).toBe(200);
  });

  it('admin scope only, a namespace is required, the primitive is one of the three', async () => {
    expect((await call('locker', 'GET', '/v1/queue/locks/x?namespace=team-a')).status).toBe(403);
    expect((await call('operator', 'GET', '/v1/queue/locks/x')).body).toMatchObject({ code: 'invalid_request' });
    expect((await call('operator', 'GET', '/v1/queue/mutexes/x?namespace=team-a')).status).toBe(400);
  });

  it('force release with ?fencingToken=: only the lease shown, 409 holder_changed once another holds it, every primitive', async () => {
    type Grant = { ownerToken: string; fencingToken: number };
    const take = async (path: string, key: string, body: Record<string, unknown>) => {
      const res = await call('locker', 'POST', `/v1/${path}/${key}/acquire`, { ttlMs: 30_000, ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as unknown as Grant;
    };
    const evict = (path: string, key: string, token: number) =>
      t.app.inject({ method: 'DELETE', url: `/v1/${path}/${key}?namespace=team-a&fencingToken=${token}`, headers: OPERATOR });
    const renews = async (path: string, key: string, grant: Grant) =>
      (await call('locker', 'POST', `/v1/${path}/${key}/renew`, { ownerToken: grant.ownerToken, ttlMs: 30_000 })).status;

    for (const [path, body] of [
      ['locks', {}],
      ['semaphores', { limit: 1 }],
      ['rwlocks', { mode: 'write' }],
    ] as const) {
      const key = `cf-${path}`;
      const shown = await take(path, key, { ...body, holder: 'shown' });
      expect((await call('locker', 'POST', `/v1/${path}/${key}/release`, { ownerToken: shown.ownerToken })).status).toBe(200);
      const newer = await take(path, key, { ...body, holder: 'newer' });
      // The operator clicks on the lease it saw; another holds the key now: nothing is evicted.
      const changed = await evict(path, key, shown.fencingToken);
      expect(changed.statusCode, `${path}: ${changed.body}`).toBe(409);
      expect(changed.headers['content-type']).toContain('application/problem+json');
      expect(changed.json()).toMatchObject({ code: 'holder_changed', status: 409 });
      expect(await renews(path, key, newer), path).toBe(200);
      // The lease shown now is evicted, and its holder can no longer renew it.
      const evicted = await evict(path, key, newer.fencingToken);
      expect(evicted.statusCode, `${path}: ${evicted.body}`).toBe(200);
      expect(JSON.stringify(evicted.json())).toContain(String(newer.fencingToken));
      expect(await renews(path, key, newer), path).toBe(409);
      expect((await evict(path, key, newer.fencingToken)).statusCode, path).toBe(404);
    }
  });

  it('release request: asked by fencing token on every primitive, shown to the holder, 409 holder_changed once another holds it', async () => {
    type Grant = { ownerToken: string; fencingToken: number };
    const ask = (path: string, key: string, fencingToken: number) =>
      t.app.inject({
        method: 'POST',
        url: `/v1/${path}/${key}/release-request?namespace=team-a`,
        headers: OPERATOR,
        payload: { fencingToken, reason: 'drain' },
      });
    for (const [path, body] of [
      ['locks', {}],
      ['semaphores', { limit: 1 }],
      ['rwlocks', { mode: 'write' }],
    ] as const) {
      const key = `rr-${path}`;
      const first = (await call('locker', 'POST', `/v1/${path}/${key}/acquire`, { ttlMs: 30_000, ...body })).body as unknown as Grant;
      const asked = await ask(path, key, first.fencingToken);
      expect(asked.statusCode, `${path}: ${asked.body}`).toBe(200);
      expect(asked.json()).toMatchObject({ fencingToken: first.fencingToken, releaseRequested: { by: 'operator', reason: 'drain' } });
      const renewed = await call('locker', 'POST', `/v1/${path}/${key}/renew`, { ownerToken: first.ownerToken, ttlMs: 30_000 });
      expect(renewed.body, path).toMatchObject({ releaseRequested: { by: 'operator', reason: 'drain' } });
      expect((await call('locker', 'POST', `/v1/${path}/${key}/release`, { ownerToken: first.ownerToken })).status).toBe(200);
      const next = (await call('locker', 'POST', `/v1/${path}/${key}/acquire`, { ttlMs: 30_000, ...body })).body as unknown as Grant;
      const changed = await ask(path, key, first.fencingToken);
      expect(changed.statusCode, `${path}: ${changed.body}`).toBe(409);
      expect(changed.json()).toMatchObject({ code: 'holder_changed' });
      const untouched = await call('locker', 'POST', `/v1/${path}/${key}/renew`, { ownerToken: next.ownerToken, ttlMs: 30_000 });
      expect(untouched.body, path).not.toHaveProperty('releaseRequested');
      await call('locker', 'POST', `/v1/${path}/${key}/release`, { ownerToken: next.ownerToken });
    }
  });
});

describe('history routes say whether they record', () => {
  beforeAll(async () => {
    t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('recording: true with history on, false (and no events) with it off', async () => {
    await call('locker', 'POST', '/v1/locks/rec/acquire', { ttlMs: 30_000 });
    const on = await call('operator', 'GET', '/v1/history/locks/rec?namespace=team-a');
    expect(on.body).toMatchObject({ recording: true, truncated: false });
    expect(on.body.events).toHaveLength(1);
    const off = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, history: null });
    try {
      await off.app.inject({
        method: 'POST',
        url: '/v1/locks/rec/acquire',
        headers: bearer(keys.plain.locker ?? ''),
        payload: { ttlMs: 30_000 },
      });
      for (const [url, who] of [
        ['/v1/history/locks/rec?namespace=team-a', 'operator'],
        ['/v1/locks/rec/history', 'locker'],
      ] as const) {
        const res = await off.app.inject({ method: 'GET', url, headers: bearer(keys.plain[who] ?? '') });
        expect(res.json()).toEqual({ key: 'rec', recording: false, truncated: false, events: [] });
      }
    } finally {
      await off.close();
    }
  });
});
