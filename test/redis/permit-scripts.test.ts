import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, describe, expect, it } from 'vitest';
import { KeySpace, type PermitKeys } from '../../src/store/redis/keys.js';
import { int, useScriptServer } from '../helpers/script-server.js';

/**
 * The semaphore and read/write lock scripts (permit-*.lua) on their own, through the script table on a
 * real redis-server: one case per return shape their header comments document, and the state they
 * leave. As test/redis/scripts.test.ts does for the lock scripts.
 */
const lua = useScriptServer();
const space = new KeySpace('plua:');
const GRACE_MS = 60_000;
const handOver = { graceMs: GRACE_MS, channelPrefix: space.grantChannelPrefix() };
let n = 0;
let lockName: string;
let keys: PermitKeys;

beforeEach(() => {
  lockName = `ns/p${++n}`;
  keys = space.permitKeys('semaphore', lockName);
});

function acquire(
  ownerToken: string,
  o: { capacity?: number; weight?: number; ttlMs?: number; waitMs?: number; waiterId?: string; holder?: string; maxWaiters?: number } = {},
) {
  return lua.scripts.run('permitAcquire', {
    ...handOver,
    lockName,
    keys,
    ownerToken,
    ttlMs: o.ttlMs ?? 10_000,
    holder: o.holder ?? '',
    weight: o.weight ?? 1,
    capacity: o.capacity ?? 2,
    waitMs: o.waitMs ?? 0,
    waiterId: o.waiterId ?? '-',
    instanceId: 'inst-a',
    maxWaiters: o.maxWaiters ?? 2,
    livenessMs: 3_000,
  });
}
const release = (ownerToken: string) => lua.scripts.run('permitRelease', { ...handOver, lockName, keys, ownerToken });

describe('permit-acquire.lua', () => {
  it('{1, fencingToken, expiresAtMs}: granted; keys are tagged by the namespace, the pool and lease ends outlive the lease', async () => {
    expect(keys.pool).toBe(
      `plua:{${new KeySpace('plua:').shardTags('ns')[new KeySpace('plua:').shardOf(lockName.slice(3))] as string}}s/` + lockName.slice(3),
    );
    const reply = (await acquire('o1', { holder: 'a|b' })) as number[];
    expect(reply).toEqual([1, int, int]);
    const [, token, end] = reply as [number, number, number];
    // n: the watch index's change counter, clock-floored like the token.
    expect(await lua.raw.hgetall(keys.pool)).toEqual({
      t: String(token),
      c: '2',
      u: '1',
      n: String(token),
      'o:o1': `1|${token}|${end}|a|b`,
    });
    expect(await lua.raw.zscore(keys.expiries, 'o1')).toBe(String(end));
    expect(await lua.raw.pttl(keys.pool)).toBeGreaterThan(10_000 + GRACE_MS - 1_000);
    expect(await lua.raw.pttl(keys.expiries)).toBeGreaterThan(10_000 + GRACE_MS - 1_000);
  });

  it('{0, retryAfterMs}: full; {5, liveCapacity, retryAfterMs}: another capacity while leases are live', async () => {
    await acquire('o1', { ttlMs: 5_000 });
    await acquire('o2', { ttlMs: 8_000 });
    const full = (await acquire('o3')) as number[];
    expect(full[0]).toBe(0);
    expect(full[1]).toBeLessThanOrEqual(5_000);
    const mismatch = (await acquire('o4', { capacity: 3 })) as number[];
    expect(mismatch).toEqual([5, 2, int]);
    expect(mismatch[2]).toBeGreaterThan(5_000);
  });

  it('{3, retryAfterMs}: queued; {2, retryAfterMs}: the queue is full; a newcomer never jumps the queue', async () => {
    await acquire('o1', { capacity: 1 });
    expect(await acquire('w1', { capacity: 1, waitMs: 5_000, waiterId: 'id1' })).toEqual([3, int]);
    expect(await acquire('w2', { capacity: 1, waitMs: 5_000, waiterId: 'id2' })).toEqual([3, int]);
    expect(await acquire('w3', { capacity: 1, waitMs: 5_000, waiterId: 'id3' })).toEqual([2, int]);
    expect(await lua.raw.hget(keys.waiters, 'id1')).toMatch(/^\d+\|\d+\|10000\|w1\|inst-a\|1\|1\|$/);
  });
});

describe('permit-release.lua', () => {
  it('1: released and handed to the queue in order, as many as fit; 0: not a live lease', async () => {
    const sub = lua.server.client();
    await sub.subscribe(`${space.grantChannelPrefix()}inst-a`);
    const messages: string[] = [];
    sub.on('message', (_c: string, m: string) => messages.push(m));
    keys = space.permitKeys('rwlock', lockName);
    await acquire('writer', { weight: 10_000, capacity: 10_000 });
    await acquire('r1', { weight: 1, capacity: 10_000, waitMs: 5_000, waiterId: 'id-r1' });
    await acquire('r2', { weight: 1, capacity: 10_000, waitMs: 5_000, waiterId: 'id-r2' });
    expect(await acquire('w2', { weight: 10_000, capacity: 10_000, waitMs: 5_000, waiterId: 'id-w2', maxWaiters: 5 })).toEqual([3, int]);
    expect(await release('writer')).toBe(1);
    expect(await release('writer')).toBe(0);
    await expect.poll(() => messages.length).toBe(2);
    expect(messages.map((m) => m.split('|')[0])).toEqual(['id-r1', 'id-r2']);
    expect(await lua.raw.zrange(keys.queue, 0, -1)).toEqual(['id-w2']);
    expect(await lua.raw.hget(keys.pool, 'u')).toBe('2');
    sub.disconnect();
  });
});

describe('permit-renew.lua', () => {
  it('{1, fencingToken, expiresAtMs}: same token, later end; {0}: no live lease', async () => {
    const [, token, end] = (await acquire('o1', { ttlMs: 1_000 })) as number[];
    const renewed = (await lua.scripts.run('permitRenew', { keys, ownerToken: 'o1', ttlMs: 20_000, graceMs: GRACE_MS })) as number[];
    expect(renewed).toEqual([1, token, int]);
    expect(renewed[2]).toBeGreaterThan(end as number);
    expect(await lua.raw.zscore(keys.expiries, 'o1')).toBe(String(renewed[2]));
    expect(await lua.scripts.run('permitRenew', { keys, ownerToken: 'nobody', ttlMs: 20_000, graceMs: GRACE_MS })).toEqual([0]);
  });

  it('{0}: a lease that ran out is not renewed, and its room is free again', async () => {
    await acquire('o1', { ttlMs: 100, capacity: 1 });
    await sleep(150);
    expect(await lua.scripts.run('permitRenew', { keys, ownerToken: 'o1', ttlMs: 20_000, graceMs: GRACE_MS })).toEqual([0]);
    expect(await acquire('o2', { capacity: 1 })).toEqual([1, int, int]);
  });
});

describe('permit-inspect.lua and permit-force-release.lua', () => {
  it('{1, capacity, waiters, nowMs, index, count, (weight, token, end, holder, asked)...}; {0, index} when nothing is live; force release returns the evicted', async () => {
    expect(await lua.scripts.run('permitInspect', { keys, shown: 10 })).toEqual([0, 0]);
    const [, t1] = (await acquire('o1', { holder: 'x' })) as number[];
    const [, t2] = (await acquire('o2')) as number[];
    await acquire('w1', { waitMs: 5_000, waiterId: 'id1' });
    const reply = (await lua.scripts.run('permitInspect', { keys, shown: 10 })) as unknown[];
    expect(reply.slice(0, 6)).toEqual([1, 2, 1, int, int, 2]);
    expect(reply.slice(6)).toEqual([1, t1, int, 'x', '', 1, t2, int, '', '']);
    // A release request on one lease is shown with it ("atMs|payload"), on no other; the index stays.
    const asked = { keys, fencingToken: t2 as number, payload: '["ops",null]', channelPrefix: handOver.channelPrefix };
    expect(await lua.scripts.run('permitRequestRelease', asked)).toEqual([1, int]);
    const withRequest = (await lua.scripts.run('permitInspect', { keys, shown: 10 })) as unknown[];
    expect(withRequest[4]).toBe(reply[4]);
    expect(withRequest.slice(6)).toEqual([1, t1, int, 'x', '', 1, t2, int, '', expect.stringMatching(/^\d+\|\["ops",null\]$/)]);
    // A page shorter than the leases: the count stays the whole, the page holds the first to end.
    const page = (await lua.scripts.run('permitInspect', { keys, shown: 1 })) as unknown[];
    expect(page.slice(5)).toEqual([2, 1, t1, int, 'x', '']);
    const evicted = (await lua.scripts.run('permitForceRelease', { ...handOver, lockName, keys })) as unknown[];
    expect(evicted).toEqual(['o1', t1, 'x', int, 'o2', t2, '', int]);
    // The waiter got one of the freed permits.
    const after = (await lua.scripts.run('permitInspect', { keys, shown: 10 })) as unknown[];
    expect(after.slice(0, 3)).toEqual([1, 2, 0]);
    // The index rose with the eviction and the hand-over.
    expect(after[4]).toBeGreaterThan(reply[4] as number);
    expect(after[7]).toBeGreaterThan(t2 as number);
    expect(await lua.scripts.run('permitForceRelease', { ...handOver, lockName, keys: space.permitKeys('semaphore', 'ns/none') })).toEqual(
      [],
    );
  });
});

describe('permit-cancel.lua and permit-heartbeat.lua', () => {
  it('{0, retryAfterMs}: taken out of the queue; {1, token, end}: it had been granted meanwhile', async () => {
    await acquire('o1', { capacity: 1, ttlMs: 5_000 });
    await acquire('w1', { capacity: 1, waitMs: 5_000, waiterId: 'id1' });
    const cancel = (id: string, owner: string) =>
      lua.scripts.run('permitCancel', { ...handOver, lockName, keys, waiterId: id, ownerToken: owner });
    const out = (await cancel('id1', 'w1')) as number[];
    expect(out[0]).toBe(0);
    expect(out[1]).toBeGreaterThan(0);
    await acquire('w2', { capacity: 1, waitMs: 5_000, waiterId: 'id2' });
    await release('o1');
    expect(await cancel('id2', 'w2')).toEqual([1, int, int]);
  });

  it('{remainingMs, grantedIds...}: refreshes waiters, hands on an ended lease, reports its own grants', async () => {
    await acquire('o1', { capacity: 1, ttlMs: 100 });
    await acquire('w1', { capacity: 1, waitMs: 5_000, waiterId: 'id1' });
    const visit = () =>
      lua.scripts.run('permitHeartbeat', { ...handOver, lockName, keys, livenessMs: 3_000, waiters: [{ id: 'id1', ownerToken: 'w1' }] });
    const early = (await visit()) as unknown[];
    expect(early).toEqual([int]);
    await sleep(150);
    const later = (await visit()) as unknown[];
    expect(later).toEqual([int, 'id1']);
    expect(later[0]).toBeGreaterThan(5_000);
  });
});
