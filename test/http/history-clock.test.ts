import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';

/**
 * The embedded store decides leases on its own clock: the wall clock at process start plus monotonic
 * time since (monotonicWallClock), which a step of the wall clock (an NTP step, a VM resumed) leaves
 * apart from Date.now() for the rest of the process's life. Grants and renewals are dated on the
 * store's clock; the instance's own events (a release, a force release) must be dated on the same one,
 * or a timeline sorts a release before the grant it ended.
 */
const keys = makeKeys([
  { id: 'locker', namespace: 'team-a', scopes: ['locks'] },
  { id: 'operator', namespace: 'ops', scopes: ['admin'] },
]);

let t: TestApp;
beforeAll(async () => {
  // The store's clock 2 s ahead of Date.now(): the wall clock was stepped back 2 s after the process started.
  const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: () => Date.now() + 2_000 });
  t = await buildTestApp({ store, auth: { mode: 'keys', keyring: keys.keyring() } });
});
afterAll(async () => {
  await t.close();
});

async function call(who: 'locker' | 'operator', method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) {
  const res = await t.app.inject({ method, url, headers: bearer(keys.plain[who] ?? ''), ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
}
const typesOf = async (path: string) => {
  const res = await call('locker', 'GET', `${path}/history`);
  expect(res.status).toBe(200);
  return (res.body.events as Array<{ type: string }>).map((e) => e.type);
};

describe('history on a store whose clock is not Date.now()', () => {
  it('grant, renew, release read in that order', async () => {
    const grant = await call('locker', 'POST', '/v1/locks/clocked/acquire', { ttlMs: 30_000 });
    const { ownerToken } = grant.body as { ownerToken: string };
    expect((await call('locker', 'POST', '/v1/locks/clocked/renew', { ownerToken, ttlMs: 30_000 })).status).toBe(200);
    expect((await call('locker', 'POST', '/v1/locks/clocked/release', { ownerToken })).status).toBe(200);
    expect(await typesOf('/v1/locks/clocked')).toEqual(['granted', 'renewed', 'released']);
  });

  it('a force release reads after the grant it ended, and a semaphore release after its grant', async () => {
    expect((await call('locker', 'POST', '/v1/locks/evicted/acquire', { ttlMs: 30_000 })).status).toBe(200);
    expect((await call('operator', 'DELETE', '/v1/locks/evicted?namespace=team-a')).status).toBe(200);
    expect(await typesOf('/v1/locks/evicted')).toEqual(['granted', 'force_released']);
    const permit = await call('locker', 'POST', '/v1/semaphores/pool/acquire', { limit: 2, ttlMs: 30_000 });
    const { ownerToken } = permit.body as { ownerToken: string };
    expect((await call('locker', 'POST', '/v1/semaphores/pool/release', { ownerToken })).status).toBe(200);
    expect(await typesOf('/v1/semaphores/pool')).toEqual(['granted', 'released']);
  });
});
