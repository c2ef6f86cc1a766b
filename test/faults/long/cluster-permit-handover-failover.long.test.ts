import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../src/config.js';
import { KeySpace } from '../../../src/store/redis/keys.js';
import { lockId } from '../../../src/domain/namespaces.js';
import { RedisStore } from '../../../src/store/redis/redis-store.js';
import { RedisCluster } from '../../helpers/redis-cluster.js';
import { eventually } from '../../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../../helpers/test-app.js';

/**
 * Semaphore and read/write lock hand-over to queued waiters while the key's master is killed and
 * failed over (no replica acks). Whatever the order, each waiter is answered once, never above the
 * capacity, never a reader beside a writer, and the fencing tokens go up.
 */
const space = new KeySpace('rh:');
let cluster: RedisCluster;
let app: TestApp;

beforeAll(async () => {
  cluster = await RedisCluster.start();
  const store = new RedisStore({ connection: cluster.connection, keyPrefix: 'rh:', commandTimeoutMs: 1_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  app = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 50 }, history: null });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await cluster?.stop();
});

const post = async (url: string, payload: object) => {
  const res = await app.app.inject({ method: 'POST', url, payload });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
};

it('semaphore of 2 and a read/write lock: waiters handed over across a master kill and failover, each answered once, exclusion kept', async () => {
  // Both keys on one master (the default namespace's shards spread over the masters: pick two in one).
  const semKey = 'sem-a';
  const master = await cluster.masterOf(space.permitKeys('semaphore', lockId('default', semKey)).pool);
  let rwKey = '';
  for (let i = 0; rwKey === ''; i++) {
    if ((await cluster.masterOf(space.permitKeys('rwlock', lockId('default', `rw-${i}`)).pool)) === master) rwKey = `rw-${i}`;
  }
  const holders = await Promise.all([
    post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 2_500 }),
    post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 2_500 }),
    post(`/v1/rwlocks/${rwKey}/acquire`, { mode: 'write', ttlMs: 2_500 }),
  ]);
  expect(holders.map((h) => h.status)).toEqual([200, 200, 200]);
  const maxToken = Math.max(...holders.map((h) => h.body.fencingToken as number));
  const waiters = [
    post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 20_000, waitMs: 30_000 }),
    post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 20_000, waitMs: 30_000 }),
    post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 20_000, waitMs: 30_000 }),
    post(`/v1/rwlocks/${rwKey}/acquire`, { mode: 'read', ttlMs: 20_000, waitMs: 30_000 }),
    post(`/v1/rwlocks/${rwKey}/acquire`, { mode: 'write', ttlMs: 20_000, waitMs: 30_000 }),
    post(`/v1/rwlocks/${rwKey}/acquire`, { mode: 'read', ttlMs: 20_000, waitMs: 30_000 }),
  ];
  await expect
    .poll(
      async () => {
        const [s, r] = await Promise.all([app.app.inject(`/v1/semaphores/${semKey}`), app.app.inject(`/v1/rwlocks/${rwKey}`)]);
        return [s.json<{ waiters: number }>().waiters, r.json<{ waiters: number }>().waiters];
      },
      { timeout: 5_000, interval: 20 },
    )
    .toEqual([3, 3]);
  const killed = await cluster.killMasterOf(space.permitKeys('semaphore', lockId('default', semKey)).pool);
  await cluster.waitForFailover(space.permitKeys('semaphore', lockId('default', semKey)).pool, killed);
  const answers = await Promise.all(waiters);
  // Each 200 is a lease from its grant (its fencing token is the Redis clock in us at the grant, or just
  // above the last token) to its expiresAt. At no moment more than the capacity, or a writer with anyone.
  const leases = answers
    .map((a, i) => ({ i, a }))
    .filter(({ a }) => a.status === 200)
    .map(({ i, a }) => ({
      sem: i < 3,
      mode: a.body.mode as string | undefined,
      from: (a.body.fencingToken as number) / 1000,
      to: Date.parse(a.body.expiresAt as string),
      token: a.body.fencingToken as number,
    }));
  for (const l of leases) expect(l.token).toBeGreaterThan(maxToken);
  expect(new Set(leases.map((l) => l.token)).size).toBe(leases.length);
  for (const l of leases) {
    const during = leases.filter((o) => o.sem === l.sem && o.from <= l.from && l.from < o.to);
    if (l.sem) expect(during.length, 'permits held at once').toBeLessThanOrEqual(2);
    else if (during.some((o) => o.mode === 'write') || l.mode === 'write') expect(during.length, 'a writer beside another lease').toBe(1);
  }
  // Each waiter is answered once: granted; told at once that its place was dropped when the failover
  // outlasted its record's liveness (3 s without a heartbeat: 503 store_unavailable, ask again); or, behind
  // a lease granted meanwhile, refused when its waitMs ran out (409).
  for (const a of answers) {
    expect([200, 409, 503], JSON.stringify(a.body)).toContain(a.status);
    if (a.status === 503) expect(a.body.code).toBe('store_unavailable');
    if (a.status === 409) expect(['semaphore_full', 'rwlock_held']).toContain(a.body.code);
  }
  // And the store is whole again: the semaphore takes a permit once its leases have ended.
  const after = await post(`/v1/semaphores/${semKey}/acquire`, { limit: 2, ttlMs: 2_000, waitMs: 25_000 });
  expect(after.status, JSON.stringify(after.body)).toBe(200);
  expect(after.body.fencingToken as number).toBeGreaterThan(Math.max(maxToken, ...leases.filter((l) => l.sem).map((l) => l.token)));
}, 120_000);
