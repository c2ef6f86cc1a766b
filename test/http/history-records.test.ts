import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { HistoryRecorder } from '../../src/domain/history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';

/**
 * Lease history (HISTORY=on) over HTTP: what is recorded matches what happened to the leases (a replayed
 * grant, a lock set's release naming keys it did not hold, a lease renewed past the events kept per key).
 */
const keys = makeKeys([
  { id: 'locker', namespace: 'team-a', scopes: ['locks'] },
  { id: 'coworker', namespace: 'team-a', scopes: ['locks'] },
]);
type Who = 'locker' | 'coworker';

let t: TestApp;
let small: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() } });
  // A per-key bound small enough to reach in a test (the default is 50 events a key).
  small = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    history: new HistoryRecorder(new MemoryHistory({ eventsPerKey: 4, keysPerNamespace: 5_000, retentionMs: 86_400_000 }), {
      flushMs: 5,
      maxBuffered: 50_000,
    }),
  });
});
afterAll(async () => {
  await t.close();
  await small.close();
});

async function call(
  app: TestApp,
  who: Who,
  method: 'GET' | 'POST',
  url: string,
  payload?: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  const res = await app.app.inject({
    method,
    url,
    headers: { ...bearer(keys.plain[who] ?? ''), ...headers },
    ...(payload === undefined ? {} : { payload }),
  });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
}
interface Event {
  type: string;
  at: string;
  fencingToken: number | null;
  holder: string | null;
}
async function historyOf(app: TestApp, key: string): Promise<Event[]> {
  const res = await call(app, 'locker', 'GET', `/v1/locks/${key}/history`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.events as Event[];
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('history records what happened', () => {
  it('an idempotent replay of an acquire is not a second grant of the lease', async () => {
    const key = 'replay-1';
    const idem = { 'idempotency-key': 'job-42' };
    const first = await call(t, 'locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'job' }, idem);
    expect(first.status).toBe(200);
    const { ownerToken, fencingToken } = first.body as { ownerToken: string; fencingToken: number };
    await sleep(20);
    expect((await call(t, 'locker', 'POST', `/v1/locks/${key}/renew`, { ownerToken, ttlMs: 30_000 })).status).toBe(200);
    // The retry whose first answer was lost: the same lease back (same fencing token), nothing new granted.
    const replay = await call(t, 'locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 30_000, holder: 'job' }, idem);
    expect(replay.status).toBe(200);
    expect(replay.body.fencingToken).toBe(fencingToken);
    const events = await historyOf(t, key);
    expect(events.map((e) => e.type)).toEqual(['granted', 'renewed']);
  });

  it("a lock set's release that names a key another caller holds records no release of that caller's lease", async () => {
    const mine = 'set-mine-1';
    const theirs = 'set-theirs-1';
    // A coworker in the same namespace holds `theirs`.
    const held = await call(t, 'coworker', 'POST', `/v1/locks/${theirs}/acquire`, { ttlMs: 30_000, holder: 'coworker' });
    expect(held.status).toBe(200);
    const set = await call(t, 'locker', 'POST', '/v1/lock-sets/acquire', { keys: [mine], ttlMs: 30_000, holder: 'locker' });
    expect(set.status).toBe(200);
    const { ownerToken } = set.body as { ownerToken: string };
    // The store frees only `mine` (the token never held `theirs`): 200.
    expect((await call(t, 'locker', 'POST', '/v1/lock-sets/release', { keys: [mine, theirs], ownerToken })).status).toBe(200);
    // The coworker still holds `theirs`...
    expect((await call(t, 'coworker', 'GET', `/v1/locks/${theirs}`)).body.holder).toBe('coworker');
    // ...but its history says a lease of it was released.
    const events = await historyOf(t, theirs);
    expect(events.map((e) => e.type)).toEqual(['granted']);
  });

  it('a lease renewed past the per-key bound, then released, is not reported expired', async () => {
    const key = 'long-job-1';
    const grant = await call(small, 'locker', 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 400, holder: 'long-job' });
    const { ownerToken, fencingToken } = grant.body as { ownerToken: string; fencingToken: number };
    for (let i = 0; i < 5; i++) {
      await sleep(30);
      expect((await call(small, 'locker', 'POST', `/v1/locks/${key}/renew`, { ownerToken, ttlMs: 400 })).status).toBe(200);
    }
    expect((await call(small, 'locker', 'POST', `/v1/locks/${key}/release`, { ownerToken })).status).toBe(200);
    // Once the last renewal's end has passed.
    await sleep(600);
    const events = await historyOf(small, key);
    // The lease was released: no expiry of it, and its release names its fencing token and holder.
    expect(events.filter((e) => e.type === 'expired')).toEqual([]);
    const released = events.find((e) => e.type === 'released');
    expect(released?.fencingToken).toBe(fencingToken);
  });
});
