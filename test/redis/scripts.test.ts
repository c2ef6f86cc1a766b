import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { KeySpace, type LockKeys } from '../../src/store/redis/keys.js';
import { RedisRateAllowance } from '../../src/store/redis/rate-allowance.js';
import { int, useScriptServer } from '../helpers/script-server.js';
import { newOwnerToken } from '../../src/domain/lease-service.js';
import { isCompactRecord, lockField, lockFields, setLockFields } from '../helpers/lock-record.js';
import { defineScripts, functionLibrary, loadScript, withEcho, type Scripts } from '../../src/store/redis/scripts.js';
import { Redis } from 'ioredis';
import { ownerTokenHex } from '../../src/store/redis/owner-bytes.js';

/**
 * Each Lua script on its own, called through the script table on a real redis-server: one case per
 * return shape its header comment documents, plus the state it leaves in Redis. The store's own tests
 * go through the parsers; these pin the scripts' contract itself.
 */
const lua = useScriptServer();
const space = new KeySpace('lua:');
const GRACE_MS = 60_000;
const CHANNELS = space.grantChannelPrefix();
let n = 0;
let lockName: string;
let keys: LockKeys;

beforeEach(() => {
  lockName = `k${++n}`;
  keys = space.lockKeys(lockName);
});

const handOver = { graceMs: GRACE_MS, channelPrefix: CHANNELS };

function acquire(
  ownerToken: string,
  options: {
    ttlMs?: number;
    waitMs?: number;
    waiterId?: string;
    holder?: string;
    maxWaiters?: number;
    maxQuotaSlots?: number;
    keys?: LockKeys;
    /** Another connection's script table (the file's own by default). */
    scripts?: Scripts;
  } = {},
) {
  return (options.scripts ?? lua.scripts).run('acquire', {
    ...handOver,
    lockName,
    keys,
    ownerToken,
    ttlMs: options.ttlMs ?? 10_000,
    holder: options.holder ?? '',
    idempotencyKey: '',
    waitMs: options.waitMs ?? 0,
    waiterId: options.waiterId ?? '-',
    instanceId: 'inst-a',
    maxWaiters: options.maxWaiters ?? 10,
    livenessMs: 3_000,
    maxQuotaSlots: options.maxQuotaSlots ?? 0,
    ...(options.keys ? { keys: options.keys } : {}),
  });
}
const release = (ownerToken: string) => lua.scripts.run('release', { ...handOver, lockName, keys, ownerToken });

/** Resolves with the next message published on `channel`. */
async function nextMessage(channel: string): Promise<{ next: Promise<string>; done: () => void }> {
  const sub = lua.server.client();
  await sub.subscribe(channel);
  const next = new Promise<string>((resolve) => sub.once('message', (_c: string, message: string) => resolve(message)));
  return { next, done: () => sub.disconnect() };
}

describe('acquire.lua', () => {
  it('{1, fencingToken, expiresAtMs}: granted; the hash holds owner, end, holder and token', async () => {
    const before = Date.now();
    const reply = (await acquire('owner-1', { ttlMs: 5_000, holder: 'h' })) as number[];
    expect(reply).toEqual([1, int, int]);
    const [, token, end] = reply as [number, number, number];
    expect(token).toBeGreaterThanOrEqual(before * 1000);
    expect(end).toBeGreaterThanOrEqual(before + 5_000);
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ o: 'owner-1', e: String(end), t: String(token), h: 'h' });
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThan(5_000 + GRACE_MS - 1_000);
  });

  it('a grant keeps no holder label or idempotency key of an earlier lease, and writes its own', async () => {
    const grant = (ownerToken: string, holder: string, idempotencyKey: string) =>
      lua.scripts.run('acquire', {
        ...handOver,
        lockName,
        keys,
        ownerToken,
        ttlMs: 5_000,
        holder,
        idempotencyKey,
        waitMs: 0,
        waiterId: '-',
        instanceId: 'inst-a',
        maxWaiters: 10,
        livenessMs: 3_000,
        maxQuotaSlots: 0,
      });
    const fields = async () => {
      const { o, h, i } = await lockFields(lua.raw, keys.lock);
      return { o, h, i };
    };
    // Each step: what the new lease brings, and what the hash then holds besides the lease itself.
    const steps: Array<[string, string, { h?: string; i?: string }]> = [
      ['w1', 'idem-1', { h: 'w1', i: 'idem-1' }],
      ['', '', {}],
      ['w2', '', { h: 'w2' }],
      ['', 'idem-2', { i: 'idem-2' }],
      ['w3', 'idem-3', { h: 'w3', i: 'idem-3' }],
      ['', 'idem-4', { i: 'idem-4' }],
      ['w5', '', { h: 'w5' }],
      ['', '', {}],
    ];
    for (const [n, [holder, idem, left]] of steps.entries()) {
      expect(await grant(`owner-${n}`, holder, idem)).toEqual([1, int, int]);
      expect(await fields()).toEqual({ o: `owner-${n}`, h: left.h, i: left.i });
      expect(await release(`owner-${n}`)).toBe(1);
    }
  });

  it('{4, ...}: a replay writes its record (its TTL again), unchanged (a WAIT after it covers the grant)', async () => {
    const grant = (ownerToken: string) =>
      lua.scripts.run('acquire', {
        ...handOver,
        lockName,
        keys,
        ownerToken,
        ttlMs: 5_000,
        holder: 'w',
        idempotencyKey: 'scope:print',
        waitMs: 0,
        waiterId: '-',
        instanceId: 'inst-a',
        maxWaiters: 10,
        livenessMs: 3_000,
        maxQuotaSlots: 0,
      });
    expect(await grant('owner-1')).toEqual([1, int, int]);
    const before = await lua.raw.get(keys.lock);
    // A write of the key, even one that changes nothing, fails a transaction WATCHing it: the replay wrote it.
    const watcher = lua.server.client();
    try {
      await watcher.watch(keys.lock);
      expect(await grant('owner-2')).toEqual([4, int, int, 'owner-1', 'w']);
      expect(await watcher.multi().get(keys.lock).exec()).toBeNull();
    } finally {
      watcher.disconnect();
    }
    expect(await lua.raw.get(keys.lock)).toBe(before);
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThan(5_000 + GRACE_MS - 1_000);
  });

  it('{0, retryAfterMs}: held and the caller does not wait', async () => {
    await acquire('owner-1', { ttlMs: 5_000 });
    const reply = (await acquire('owner-2')) as number[];
    expect(reply).toEqual([0, int]);
    expect(reply[1]).toBeGreaterThan(4_000);
    expect(reply[1]).toBeLessThanOrEqual(5_000);
  });

  it('{3, retryAfterMs}: queued; {2, retryAfterMs}: the queue holds the most live waiters allowed', async () => {
    await acquire('owner-1', { ttlMs: 5_000 });
    expect(await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1', maxWaiters: 1 })).toEqual([3, int]);
    expect(await lua.raw.zrange(keys.queue, 0, -1)).toEqual(['w1']);
    expect(await lua.raw.hget(keys.waiters, 'w1')).toMatch(/^\d+\|\d+\|10000\|owner-2\|inst-a\|$/);
    expect(await acquire('owner-3', { waitMs: 5_000, waiterId: 'w2', maxWaiters: 1 })).toEqual([2, int]);
  });

  it('a dead waiter does not count toward the cap: it is swept out and the caller queued', async () => {
    await acquire('owner-1', { ttlMs: 5_000 });
    await lua.raw.zadd(keys.queue, 1, 'dead');
    await lua.raw.hset(keys.waiters, 'dead', `1|${Date.now() + 60_000}|1000|ghost|inst-z|`);
    expect(await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1', maxWaiters: 1 })).toEqual([3, int]);
    expect(await lua.raw.zrange(keys.queue, 0, -1)).toEqual(['w1']);
  });

  it('the fencing token is last + 1 when the last one is ahead of the clock', async () => {
    await setLockFields(lua.raw, keys.lock, { t: '5000000000000000' });
    expect(await acquire('owner-1')).toEqual([1, 5_000_000_000_000_001, int]);
  });
});

describe('the lock record (_lock.lua): compact, and every field reads back as written', () => {
  it('a plain held lock is 28 bytes (an embedded string in 48 B); a free one keeping its last token 8', async () => {
    const ownerToken = newOwnerToken();
    const [, token, end] = (await acquire(ownerToken, { ttlMs: 30_000 })) as number[];
    expect(await lua.raw.strlen(keys.lock)).toBe(28);
    expect(await lua.raw.object('ENCODING', keys.lock)).toBe('embstr');
    expect(await isCompactRecord(lua.raw, keys.lock)).toBe(true);
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ o: ownerToken, e: String(end), t: String(token) });
    expect(await release(ownerToken)).toBe(1);
    expect(await lua.raw.strlen(keys.lock)).toBe(8);
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ t: String(token) });
  });

  it('round trips: any owner token, ends far from the token, every optional field', async () => {
    const t = 1_790_000_000_000_000;
    const tMs = t / 1000;
    const owners = [
      newOwnerToken(),
      'owner-1',
      // 22 characters that are no 16 bytes of the service's: spare bits set, a character outside base64url.
      'AAAAAAAAAAAAAAAAAAAAAB',
      'AAAAAAAAAAAAAAAAAAAA+A',
      '_-zzZZ0099__--AAaa11Qw',
      'x'.repeat(300),
    ];
    const ends = [tMs + 30_000, tMs, tMs - 1, tMs + 2 ** 31 + 5, tMs - 2 ** 31 - 5, 2 ** 45];
    const extras: Array<Record<string, string>> = [
      {},
      { h: 'worker-a', i: 'scope:fp' },
      { q: String(tMs + 9_000), w: String(tMs + 8_000), b: '1790000040', d: 'tok|500', r: '1790000000000|["op","why"]' },
      { r: 'only-r' },
    ];
    const cases: Array<Record<string, string>> = [];
    for (const o of owners) for (const e of ends) for (const more of extras) cases.push({ t: String(t), o, e: String(e), ...more });
    cases.push({ t: String(t) }, { w: String(tMs + 1_000) }, { t: '1' }, { t: String(2 ** 53 - 1), o: 'a', e: '1' });
    for (const [i, fields] of cases.entries()) {
      const key = `${keys.lock}:case${i}`;
      await setLockFields(lua.raw, key, fields);
      expect(await isCompactRecord(lua.raw, key)).toBe(true);
      expect(await lockFields(lua.raw, key)).toEqual(fields);
    }
  });

  it("a hand-over between two of the service's owner tokens stores the new owner's bytes, and a renew keeps them", async () => {
    const [first, second] = [newOwnerToken(), newOwnerToken()];
    await acquire(first);
    await acquire(second, { waitMs: 5_000, waiterId: 'w1', ttlMs: 7_000 });
    expect(await release(first)).toBe(1);
    expect(await lockFields(lua.raw, keys.lock)).toMatchObject({ o: second });
    const renew = (ownerToken: string) =>
      lua.scripts.run('renew', { lockKey: keys.lock, quota: keys.quota, ownerToken, ttlMs: 10_000, graceMs: GRACE_MS });
    expect(await renew(first)).toEqual([0]);
    expect(await renew(second)).toEqual([1, int, int]);
    expect(await lockFields(lua.raw, keys.lock)).toMatchObject({ o: second });
    expect(await release(second)).toBe(1);
  });

  it("the owner token's bytes worked out in Node (knowOwner) are the script's own reading of the token, for any token", async () => {
    // The script's ownerBytes alone, without knowOwner: its bytes in hex, or false for a token kept as given.
    const decode = `${loadScript('_common.lua')}\n${loadScript('_lock.lua')}\nlocal out = {}
for k, o in ipairs(ARGV) do
  local b = ownerBytes(o)
  out[k] = b and (string.gsub(b, '.', function(c) return string.format('%02x', string.byte(c)) end)) or 'none'
end
return out`;
    const tokens = Array.from({ length: 300 }, () => newOwnerToken());
    // Near misses: spare bits set in the last character, one character short or long, characters outside
    // base64url (Buffer's decoder would skip or accept them), padding, the alphabet's ends.
    for (const last of 'ABPQRfghvwxz09-_') tokens.push(`${'A'.repeat(21)}${last}`);
    tokens.push('A'.repeat(21), 'A'.repeat(23), `${'A'.repeat(20)}+A`, `${'A'.repeat(20)}/A`, `${'A'.repeat(20)}==`);
    tokens.push(`${'_'.repeat(21)}w`, `${'-'.repeat(21)}g`, `${'z'.repeat(21)}Q`, `${'9'.repeat(21)}A`, 'AAAAAAAAAA AAAAAAAAAAA', '');
    const script = (await lua.raw.eval(decode, 0, ...tokens)) as string[];
    expect(tokens.map((t) => ownerTokenHex(t) || 'none')).toEqual(script);
    expect(script.filter((b) => b !== 'none').length).toBeGreaterThan(300);
  });

  it('an owner without an end (or an end without an owner) is no lease: not kept', async () => {
    await setLockFields(lua.raw, keys.lock, { t: '7', o: 'lone-owner' });
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ t: '7' });
    await setLockFields(lua.raw, keys.lock, { e: '12345' });
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ t: '7' });
  });

  it('a damaged record fails the call: never read as a free lock, never granted', async () => {
    const ownerToken = newOwnerToken();
    await acquire(ownerToken, { ttlMs: 30_000 });
    const whole = (await lua.raw.getBuffer(keys.lock)) as Buffer;
    for (const damaged of [whole.subarray(0, 20), Buffer.concat([whole, Buffer.from([0])]), Buffer.from([0x91, 1, 2])]) {
      await lua.raw.set(keys.lock, damaged);
      await expect(acquire(newOwnerToken())).rejects.toThrow(/lock record unreadable|data string too short/);
    }
  });
});

/** Two lock ids of one namespace whose keys fall in the same quota shard. */
function sameShard(namespace: string): [LockKeys, LockKeys] {
  const first = `${namespace}/a`;
  for (let i = 0; ; i++) {
    const other = `${namespace}/b${i}`;
    if (space.shardOf(`b${i}`) === space.shardOf('a')) return [space.lockKeys(first), space.lockKeys(other)];
  }
}

/** The units a quota shard counts (field n of its count hash; 0 when the shard has no keys). */
async function counted(quota: LockKeys['quota']): Promise<number> {
  return Number((await lua.raw.hget(quota.count, 'n')) ?? 0);
}

describe('the namespace quota, counted per shard inside the lock scripts (_quota.lua)', () => {
  it('{5, retryAfterMs}: the shard counts its cap; a release gives the unit back in the same step; a waiter takes one and a cancel gives it back', async () => {
    const [a, b] = sameShard(`ns-${lockName}`);
    expect(a.quota).toEqual(b.quota);
    expect(await acquire('owner-a', { keys: a, maxQuotaSlots: 1, ttlMs: 5_000 })).toEqual([1, int, int]);
    const refused = (await acquire('owner-b', { keys: b, maxQuotaSlots: 1 })) as number[];
    expect(refused[0]).toBe(5);
    expect(refused[1]).toBeGreaterThan(4_000);
    expect(await counted(a.quota)).toBe(1);
    expect(await lua.scripts.run('release', { ...handOver, lockName, keys: a, ownerToken: 'owner-a' })).toBe(1);
    expect(await counted(a.quota)).toBe(0);
    expect(await acquire('owner-b', { keys: b, maxQuotaSlots: 1 })).toEqual([1, int, int]);
    expect(await acquire('owner-c', { keys: b, maxQuotaSlots: 2, waitMs: 5_000, waiterId: 'w1' })).toEqual([3, int]);
    expect(await counted(b.quota)).toBe(2);
    expect(await lua.scripts.run('cancel', { keys: b, waiterId: 'w1', ownerToken: 'owner-c' })).toEqual([0, int]);
    expect(await counted(b.quota)).toBe(1);
  });

  it('a waiter granted by a hand-over keeps its unit (field b) until it releases; a renew moves a unit to the new end', async () => {
    const [a] = sameShard(`ns-${lockName}`);
    await acquire('owner-a', { keys: a, maxQuotaSlots: 5, ttlMs: 5_000 });
    expect(await acquire('owner-w', { keys: a, maxQuotaSlots: 5, waitMs: 30_000, waiterId: 'w1' })).toEqual([3, int]);
    expect(await counted(a.quota)).toBe(2);
    expect(await lua.scripts.run('release', { ...handOver, lockName, keys: a, ownerToken: 'owner-a' })).toBe(1);
    expect(await counted(a.quota)).toBe(1);
    const waiterSecond = await lockField(lua.raw, a.lock, 'b');
    expect(Number(await lua.raw.hget(a.quota.count, waiterSecond as string))).toBe(1);
    const renewed = (await lua.scripts.run('renew', {
      lockKey: a.lock,
      quota: a.quota,
      ownerToken: 'owner-w',
      ttlMs: 90_000,
      graceMs: GRACE_MS,
    })) as number[];
    expect(await lockField(lua.raw, a.lock, 'b')).toBeNull();
    expect(Number((await lua.raw.hget(a.quota.count, waiterSecond as string)) ?? 0)).toBe(0);
    expect(Number(await lua.raw.hget(a.quota.count, String(Math.ceil((renewed[2] as number) / 1000))))).toBe(1);
    expect(await counted(a.quota)).toBe(1);
    expect(await lua.scripts.run('release', { ...handOver, lockName, keys: a, ownerToken: 'owner-w' })).toBe(1);
    expect(await counted(a.quota)).toBe(0);
  });

  it('a renew counts no unit for a lease whose second counts none (granted with the quota off)', async () => {
    const [a] = sameShard(`ns-${lockName}`);
    expect(await acquire('owner-a', { keys: a, maxQuotaSlots: 0, ttlMs: 5_000 })).toEqual([1, int, int]);
    expect(await counted(a.quota)).toBe(0);
    const renewed = (await lua.scripts.run('renew', {
      lockKey: a.lock,
      quota: a.quota,
      ownerToken: 'owner-a',
      ttlMs: 90_000,
      graceMs: GRACE_MS,
    })) as number[];
    expect(renewed[0]).toBe(1);
    // Nothing given back, so nothing counted at the new end either: the shard holds no unit of this lease.
    expect(await counted(a.quota)).toBe(0);
    expect(await lua.raw.hget(a.quota.count, String(Math.ceil((renewed[2] as number) / 1000)))).toBeNull();
  });

  describe('a lease whose quota is counted around the lock scripts (maxQuotaSlots -1) gives back and moves no unit of theirs', () => {
    /** Counts another lease's unit in the second `endMs` falls in, in `quota`'s shard (as a quota-slot call would). */
    const otherUnit = async (quota: LockKeys['quota'], endMs: number, id: string) => {
      expect(await lua.scripts.run('quotaAdd', { quota, endMs, quotaSlotId: id })).toBe(1);
      return Math.ceil(endMs / 1000);
    };
    const inSecond = async (quota: LockKeys['quota'], second: number) => Number((await lua.raw.hget(quota.count, String(second))) ?? 0);
    const renew = (lock: LockKeys, ownerToken: string, ttlMs: number) =>
      lua.scripts.run('renew', { lockKey: lock.lock, quota: lock.quota, ownerToken, ttlMs, graceMs: GRACE_MS }) as Promise<number[]>;

    it('release, renew and force release leave the other lease of its second counted', async () => {
      const [a, b] = sameShard(`ns-${lockName}`);
      const granted = (await acquire('owner-a', { keys: a, maxQuotaSlots: -1, ttlMs: 60_000 })) as number[];
      expect(granted[0]).toBe(1);
      expect(await lockField(lua.raw, a.lock, 'b')).toBe('0');
      const second = await otherUnit(a.quota, granted[2] as number, 'other-1');
      // A renewal moves nothing and the lease still says it holds no unit here.
      const renewed = await renew(a, 'owner-a', 120_000);
      // Tag 2: renewed, its quota slot for the caller to carry (it took no unit here).
      expect(renewed[0]).toBe(2);
      expect(await lockField(lua.raw, a.lock, 'b')).toBe('0');
      expect(await inSecond(a.quota, second)).toBe(1);
      expect(await inSecond(a.quota, Math.ceil((renewed[2] as number) / 1000))).toBe(0);
      expect(await lua.scripts.run('release', { ...handOver, lockName: `ns-${lockName}/a`, keys: a, ownerToken: 'owner-a' })).toBe(1);
      expect(await inSecond(a.quota, second)).toBe(1);
      expect(await counted(a.quota)).toBe(1);
      // Force release too.
      const next = (await acquire('owner-b', { keys: b, maxQuotaSlots: -1, ttlMs: 60_000 })) as number[];
      const secondB = await otherUnit(b.quota, next[2] as number, 'other-2');
      expect(((await lua.scripts.run('forceRelease', { ...handOver, lockName: `ns-${lockName}/b0`, keys: b })) as unknown[])[0]).toBe(1);
      expect(await inSecond(b.quota, secondB)).toBe(secondB === second ? 2 : 1);
      expect(await counted(a.quota)).toBe(2);
    });

    it('a waiter that took no unit: its cancel gives back none, and the lease a hand-over gives it says so', async () => {
      const [a] = sameShard(`ns-${lockName}`);
      const name = `ns-${lockName}/a`;
      await acquire('owner-a', { keys: a, maxQuotaSlots: -1, ttlMs: 5_000 });
      expect(await acquire('owner-w', { keys: a, maxQuotaSlots: -1, waitMs: 30_000, waiterId: 'w1' })).toEqual([3, int]);
      // The waiter's unit would have been counted to its wait's end plus its lease: another lease's unit there.
      const [, deadline, ttl] = ((await lua.raw.hget(a.waiters, 'w1')) as string).split('|');
      const waitSecond = await otherUnit(a.quota, Number(deadline) + Number(ttl), 'other-w');
      expect(await lua.scripts.run('cancel', { keys: a, waiterId: 'w1', ownerToken: 'owner-w' })).toEqual([0, int]);
      expect(await inSecond(a.quota, waitSecond)).toBe(1);
      // Queued again, then handed the lock by the holder's release: the lease it gets holds no unit here either.
      expect(await acquire('owner-w', { keys: a, maxQuotaSlots: -1, waitMs: 30_000, waiterId: 'w2' })).toEqual([3, int]);
      expect(await lua.scripts.run('release', { ...handOver, lockName: name, keys: a, ownerToken: 'owner-a' })).toBe(1);
      expect(await lockField(lua.raw, a.lock, 'o')).toBe('owner-w');
      expect(await lockField(lua.raw, a.lock, 'b')).toBe('0');
      expect(await lua.scripts.run('release', { ...handOver, lockName: name, keys: a, ownerToken: 'owner-w' })).toBe(1);
      expect(await inSecond(a.quota, waitSecond)).toBe(1);
      expect(await counted(a.quota)).toBe(1);
    });

    it("a lock set's keys (counted through the quota-slot calls) give back none when released or renewed one by one", async () => {
      const id = `ns-${lockName}/set-a`;
      const keysA = space.lockKeys(id);
      const set = (await lua.scripts.run('lockSetAcquire', {
        members: [{ keys: keysA, name: id }],
        ownerToken: 'owner-set',
        ttlMs: 60_000,
        holder: 'h',
        graceMs: GRACE_MS,
        lockDelayMs: 0,
        channelPrefix: CHANNELS,
      })) as number[];
      expect(set[0]).toBe(1);
      expect(await lockField(lua.raw, keysA.lock, 'b')).toBe('0');
      const second = await otherUnit(keysA.quota, set[1] as number, 'other-set');
      expect((await renew(keysA, 'owner-set', 90_000))[0]).toBe(2);
      expect(((await lua.scripts.run('forceRelease', { ...handOver, lockName: id, keys: keysA })) as unknown[])[0]).toBe(1);
      expect(await inSecond(keysA.quota, second)).toBe(1);
    });
  });

  it('a lease that expires without a release stops counting once its second has ended', async () => {
    const [a, b] = sameShard(`ns-${lockName}`);
    expect(await acquire('owner-a', { keys: a, maxQuotaSlots: 1, ttlMs: 20 })).toEqual([1, int, int]);
    const end = Math.ceil((Date.now() + 20) / 1000) * 1000;
    let reply = (await acquire('owner-b', { keys: b, maxQuotaSlots: 1 })) as number[];
    // Condition, not a sleep: asked again until the shard admits it, at most a few seconds past the end.
    while (reply[0] === 5 && Date.now() < end + 5_000) {
      await sleep(Math.max(1, reply[1] as number));
      reply = (await acquire('owner-b', { keys: b, maxQuotaSlots: 1 })) as number[];
    }
    expect(reply[0]).toBe(1);
    expect(await counted(a.quota)).toBe(1);
  });

  it('a unit given back is not taken off again when its second is swept: the count stays exact', async () => {
    const [a, b] = sameShard(`ns-${lockName}`);
    expect(await acquire('owner-a', { keys: a, maxQuotaSlots: 2, ttlMs: 20 })).toEqual([1, int, int]);
    expect(await lua.scripts.run('release', { ...handOver, lockName, keys: a, ownerToken: 'owner-a' })).toBe(1);
    // The given-back second stays indexed (its count 0) until a take sweeps it.
    const earliest = Number(await lua.raw.hget(a.quota.count, 'm'));
    expect(await acquire('owner-b', { keys: b, maxQuotaSlots: 2, ttlMs: 60_000 })).toEqual([1, int, int]);
    expect(await counted(a.quota)).toBe(1);
    // Condition, not a sleep: Redis's own clock past the end of that second.
    const redisMs = async () => {
      const [s, us] = await lua.raw.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    while ((await redisMs()) <= earliest * 1000) await sleep(20);
    // This take sweeps the ended second: b's unit still counts, so the shard now holds 2 and is full.
    expect(await acquire('owner-a2', { keys: a, maxQuotaSlots: 2, ttlMs: 60_000 })).toEqual([1, int, int]);
    expect(await counted(a.quota)).toBe(2);
    expect(((await acquire('owner-c', { keys: space.lockKeys(`ns-${lockName}/c`), maxQuotaSlots: 2 })) as number[])[0]).toBe(
      space.shardOf('c') === space.shardOf('a') ? 5 : 1,
    );
  });

  it('a give-back its shard no longer counts (its second swept, at 0, or the shard gone) leaves the shard as it was', async () => {
    const [a, b] = sameShard(`ns-${lockName}`);
    const releaseOf = (k: LockKeys, ownerToken: string) => lua.scripts.run('release', { ...handOver, lockName, keys: k, ownerToken });
    const secondOf = (reply: unknown) => String(Math.ceil(((reply as number[])[2] as number) / 1000));
    const first = await acquire('owner-a', { keys: a, maxQuotaSlots: 5, ttlMs: 60_000 });
    expect(first).toEqual([1, int, int]);
    // Another unit, in a later second, that must stay counted as it is.
    expect(await acquire('owner-b', { keys: b, maxQuotaSlots: 5, ttlMs: 120_000 })).toEqual([1, int, int]);
    // a's second swept, as a take does once it has ended: its count gone, n less its unit.
    await lua.raw.hdel(a.quota.count, secondOf(first));
    await lua.raw.hincrby(a.quota.count, 'n', -1);
    let shard = await lua.raw.hgetall(a.quota.count);
    expect(await releaseOf(a, 'owner-a')).toBe(1);
    expect(await lua.raw.hgetall(a.quota.count)).toEqual(shard);
    // Its second at 0 (its unit given back before): not taken below it.
    const next = await acquire('owner-a2', { keys: a, maxQuotaSlots: 5, ttlMs: 60_000 });
    expect(next).toEqual([1, int, int]);
    const count = Number(await lua.raw.hget(a.quota.count, secondOf(next)));
    await lua.raw.hset(a.quota.count, secondOf(next), '0');
    await lua.raw.hincrby(a.quota.count, 'n', -count);
    shard = await lua.raw.hgetall(a.quota.count);
    expect(await releaseOf(a, 'owner-a2')).toBe(1);
    const after = await lua.raw.hgetall(a.quota.count);
    // Left at 0 or dropped (a sweep reads an absent second as 0), never below; n as it was.
    expect(after[secondOf(next)] ?? '0').toBe('0');
    expect({ ...after, [secondOf(next)]: '0' }).toEqual(shard);
    // The shard gone altogether (its keys expired): the release leaves no key of it behind.
    expect(await releaseOf(b, 'owner-b')).toBe(1);
    expect(await acquire('owner-a3', { keys: a, maxQuotaSlots: 5, ttlMs: 60_000 })).toEqual([1, int, int]);
    await lua.raw.del(a.quota.count, a.quota.ends);
    expect(await releaseOf(a, 'owner-a3')).toBe(1);
    expect(await lua.raw.exists(a.quota.count, a.quota.ends)).toBe(0);
  });
});

describe('renew.lua', () => {
  it('{1, fencingToken, expiresAtMs}: renewed, same token, later end', async () => {
    const [, token, end] = (await acquire('owner-1', { ttlMs: 1_000 })) as [number, number, number];
    const reply = (await lua.scripts.run('renew', {
      lockKey: keys.lock,
      quota: keys.quota,
      ownerToken: 'owner-1',
      ttlMs: 60_000,
      graceMs: GRACE_MS,
    })) as number[];
    expect(reply).toEqual([1, token, int]);
    expect(reply[2]).toBeGreaterThan(end);
  });

  it('{0}: this token holds no live lease', async () => {
    await acquire('owner-1');
    expect(
      await lua.scripts.run('renew', {
        lockKey: keys.lock,
        quota: keys.quota,
        ownerToken: 'someone-else',
        ttlMs: 1_000,
        graceMs: GRACE_MS,
      }),
    ).toEqual([0]);
    expect(
      await lua.scripts.run('renew', {
        lockKey: space.lock('unknown'),
        quota: keys.quota,
        ownerToken: 'x',
        ttlMs: 1_000,
        graceMs: GRACE_MS,
      }),
    ).toEqual([0]);
  });
});

describe('release.lua', () => {
  it('1: released; the last token stays for the grace period; 0: not the owner', async () => {
    const [, token] = (await acquire('owner-1')) as [number, number];
    expect(await release('someone-else')).toBe(0);
    expect(await release('owner-1')).toBe(1);
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ t: String(token) });
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThan(GRACE_MS - 1_000);
    expect(await release('owner-1')).toBe(0);
  });

  it('hands the lock to the first live waiter and announces it on that waiter instance’s channel', async () => {
    const [, token] = (await acquire('owner-1')) as [number, number];
    await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1', ttlMs: 7_000 });
    const message = await nextMessage(`${CHANNELS}inst-a`);
    try {
      expect(await release('owner-1')).toBe(1);
      const [waiterId, grantedToken, end, name] = (await message.next).split('|');
      expect([waiterId, name]).toEqual(['w1', lockName]);
      expect(Number(grantedToken)).toBeGreaterThan(token);
      expect(await lockField(lua.raw, keys.lock, 'o')).toBe('owner-2');
      expect(await lockField(lua.raw, keys.lock, 'e')).toBe(end);
      expect(await lua.raw.zcard(keys.queue)).toBe(0);
    } finally {
      message.done();
    }
  });
});

describe('inspect.lua', () => {
  it('{1, fencingToken, expiresAtMs, ttlRemainingMs, holder, waiters}: held; waiters counts live ones', async () => {
    const [, token, end] = (await acquire('owner-1', { ttlMs: 5_000, holder: 'worker-7' })) as [number, number, number];
    await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1' });
    await lua.raw.zadd(keys.queue, 1, 'dead');
    await lua.raw.hset(keys.waiters, 'dead', `1|${Date.now() + 60_000}|1000|ghost|inst-z|`);
    const reply = (await lua.scripts.run('inspect', { keys })) as unknown[];
    expect(reply).toEqual([1, token, end, int, 'worker-7', 1]);
    expect(reply[3]).toBeLessThanOrEqual(5_000);
    // Read-only: the dead record is still there.
    expect(await lua.raw.zcard(keys.queue)).toBe(2);
  });

  it('holder "" when none was given; {0, lastFencingToken, lockDelayLeftMs} when free', async () => {
    await acquire('owner-1');
    const held = (await lua.scripts.run('inspect', { keys })) as unknown[];
    expect(held).toEqual([1, int, int, int, '', 0]);
    await release('owner-1');
    expect(await lua.scripts.run('inspect', { keys })).toEqual([0, held[1], 0]);
    await lua.raw.del(keys.lock);
    expect(await lua.scripts.run('inspect', { keys })).toEqual([0, 0, 0]);
  });

  it('a seventh element, the lease\'s release request ("atMs|payload"), once its holder was asked; gone with the lease', async () => {
    const [, token] = (await acquire('owner-1', { holder: 'w' })) as [number, number];
    const ask = { lockKey: keys.lock, fencingToken: token, payload: '["ops","deploy"]', channelPrefix: CHANNELS, lockName };
    expect(await lua.scripts.run('requestRelease', ask)).toEqual([1, int]);
    expect(await lua.scripts.run('inspect', { keys })).toEqual([
      1,
      token,
      int,
      int,
      'w',
      0,
      expect.stringMatching(/^\d+\|\["ops","deploy"\]$/),
    ]);
    await release('owner-1');
    await acquire('owner-2');
    expect(await lua.scripts.run('inspect', { keys })).toEqual([1, int, int, int, '', 0]);
  });
});

describe('cancel.lua', () => {
  it('{0, retryAfterMs}: taken out of the queue; retryAfterMs is the time left on the lease', async () => {
    await acquire('owner-1', { ttlMs: 5_000 });
    await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1' });
    const reply = (await lua.scripts.run('cancel', { keys, waiterId: 'w1', ownerToken: 'owner-2' })) as number[];
    expect(reply).toEqual([0, int]);
    expect(reply[1]).toBeGreaterThan(4_000);
    expect(await lua.raw.zcard(keys.queue)).toBe(0);
    expect(await lua.raw.hlen(keys.waiters)).toBe(0);
  });

  it('{1, fencingToken, expiresAtMs}: it had been handed the lock; {0, 0}: gone and the lock is free', async () => {
    await acquire('owner-1');
    await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1' });
    await release('owner-1');
    const granted = (await lua.scripts.run('cancel', { keys, waiterId: 'w1', ownerToken: 'owner-2' })) as number[];
    expect(granted).toEqual([1, int, int]);
    expect(Number(await lockField(lua.raw, keys.lock, 't'))).toBe(granted[1]);
    await release('owner-2');
    expect(await lua.scripts.run('cancel', { keys, waiterId: 'w1', ownerToken: 'owner-2' })).toEqual([0, 0]);
  });
});

describe('heartbeat.lua', () => {
  const beat = (waiters: Array<{ id: string; ownerToken: string }>) =>
    lua.scripts.run('heartbeat', { ...handOver, lockName, keys, livenessMs: 3_000, waiters });

  it('{remainingLeaseMs, ""}: refreshes its waiters while the lock is held by someone else', async () => {
    await acquire('owner-1', { ttlMs: 5_000 });
    await acquire('owner-2', { waitMs: 60_000, waiterId: 'w1' });
    const before = Number((await lua.raw.hget(keys.waiters, 'w1'))?.split('|')[0]);
    await sleep(5);
    const reply = (await beat([{ id: 'w1', ownerToken: 'owner-2' }])) as unknown[];
    expect(reply).toEqual([int, '']);
    expect(reply[0]).toBeGreaterThan(4_000);
    expect(Number((await lua.raw.hget(keys.waiters, 'w1'))?.split('|')[0])).toBeGreaterThan(before);
  });

  it('{remainingLeaseMs, waiterId}: a lease that ran out is handed to the first live waiter, one of this instance', async () => {
    await acquire('owner-1', { ttlMs: 30 });
    await acquire('owner-2', { waitMs: 60_000, waiterId: 'w1' });
    await sleep(50);
    const reply = (await beat([{ id: 'w1', ownerToken: 'owner-2' }])) as unknown[];
    expect(reply).toEqual([int, 'w1']);
    expect(await lockField(lua.raw, keys.lock, 'o')).toBe('owner-2');
  });

  it('{0, ""}: the lock is free', async () => {
    expect(await beat([])).toEqual([0, '']);
  });
});

describe('force-release.lua', () => {
  it('{1, fencingToken, holder, evictedOwnerToken, expiresAtMs, unitHere}: released whoever held it; {0}: no live lease', async () => {
    // Its quota counted through the quota-slot calls (field b = 0): it took no unit of the lock scripts (0).
    const [, token, end] = (await acquire('owner-1', { holder: 'stuck', maxQuotaSlots: -1 })) as [number, number, number];
    expect(await lua.scripts.run('forceRelease', { ...handOver, lockName, keys })).toEqual([1, token, 'stuck', 'owner-1', end, 0]);
    expect(await lockFields(lua.raw, keys.lock)).toEqual({ t: String(token) });
    expect(await lua.scripts.run('forceRelease', { ...handOver, lockName, keys })).toEqual([0]);
    await acquire('owner-2', { maxQuotaSlots: 5 });
    // Counted inside under a cap: its unit is given back here (1).
    expect(await lua.scripts.run('forceRelease', { ...handOver, lockName, keys })).toEqual([1, int, '', 'owner-2', int, 1]);
    expect(await counted(keys.quota)).toBe(0);
  });
});

describe('quota-reserve.lua, quota-extend.lua and quota-free.lua', () => {
  it('quota-add refuses an end that is not a whole number of ms below 2^53, and the shard keeps its units', async () => {
    const quota = space.quotaFor(`ns-${lockName}`, 'a', 100);
    expect(await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 60_000, maxQuotaSlots: 100 })).toEqual([1]);
    // %d prints these as -2^63: a PEXPIRE of it deleted the shard, every unit counted in it.
    for (const endMs of [1e19, Number.POSITIVE_INFINITY, 1.5e12 + 0.5]) {
      await expect(lua.scripts.run('quotaAdd', { quota, endMs, quotaSlotId: '' })).rejects.toThrow(/not a whole number/);
    }
    expect(await lua.raw.zscore(quota.ends, 'u:a')).not.toBeNull();
    expect(await counted(quota)).toBe(1);
  });

  it('{1}: reserved; {0, retryAfterMs}: the shard is full until its earliest counted second ends', async () => {
    const quota = space.quotaFor(`ns-${lockName}`, 'a', 2);
    expect(await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 3_000, maxQuotaSlots: 2 })).toEqual([1]);
    expect(await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'b', ttlMs: 9_000, maxQuotaSlots: 2 })).toEqual([1]);
    const full = (await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'c', ttlMs: 1_000, maxQuotaSlots: 2 })) as number[];
    expect(full).toEqual([0, int]);
    expect(full[1]).toBeGreaterThan(2_000);
    expect(full[1]).toBeLessThanOrEqual(4_000);
    // An existing slot may always be reserved again (its end only moves later).
    expect(await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 1, maxQuotaSlots: 2 })).toEqual([1]);
    expect(Number(await lua.raw.hget(quota.count, 'n'))).toBe(2);
  });

  it('1: an existing unit moved later (never earlier); 0: no such unit, counted anew unless its end has passed; quota-free gives it back once', async () => {
    const quota = space.quotaFor(`ns-${lockName}`, 'a', 2);
    await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 1_000, maxQuotaSlots: 2 });
    const second = Number(await lua.raw.zscore(quota.ends, 'u:a'));
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'a', expiresAtMs: second * 1000 + 5_000 })).toBe(1);
    expect(Number(await lua.raw.zscore(quota.ends, 'u:a'))).toBe(second + 5);
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'a', expiresAtMs: second * 1000 })).toBe(1);
    expect(Number(await lua.raw.zscore(quota.ends, 'u:a'))).toBe(second + 5);
    expect(Number(await lua.raw.hget(quota.count, String(second + 5)))).toBe(1);
    // A unit gone missing while its lease lived on is counted again, without a cap.
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'ghost', expiresAtMs: second * 1000 })).toBe(0);
    expect(Number(await lua.raw.zscore(quota.ends, 'u:ghost'))).toBe(second);
    expect(Number(await lua.raw.hget(quota.count, 'n'))).toBe(2);
    // An end already passed counts nothing (and sets no expiry in the past, which would delete the shard).
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'late', expiresAtMs: Date.now() - 5_000 })).toBe(0);
    expect(await lua.raw.zscore(quota.ends, 'u:late')).toBeNull();
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'ghost' })).toBe(1);
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'a' })).toBe(1);
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'a' })).toBe(0);
    expect(Number(await lua.raw.hget(quota.count, 'n'))).toBe(0);
  });

  it('quota-free with an end retires a unit: given back, then neither moved nor counted again by quota-extend (2) until that end', async () => {
    const quota = space.quotaFor(`ns-${lockName}`, 'a', 2);
    await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 1_000, maxQuotaSlots: 2 });
    const leaseEnd = Date.now() + 60_000;
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'a', retiredUntilMs: leaseEnd })).toBe(1);
    expect(await counted(quota)).toBe(0);
    // Kept under its member, half a second past its end's second, until then; the shard lives as long.
    expect(Number(await lua.raw.zscore(quota.ends, 'u:a'))).toBe(Math.ceil(leaseEnd / 1000) + 0.5);
    expect(await lua.raw.pttl(quota.ends)).toBeGreaterThan(60_000);
    // The extend of a renewal decided before the eviction: nothing moved, nothing counted.
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'a', expiresAtMs: leaseEnd })).toBe(2);
    expect(await counted(quota)).toBe(0);
    // A plain give-back (the evicted holder's own release) neither gives anything back nor lifts the mark.
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'a' })).toBe(0);
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'a', expiresAtMs: leaseEnd })).toBe(2);
    expect(await counted(quota)).toBe(0);
    // A missing unit retired: nothing given back, the mark kept; an end already passed marks nothing.
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'b', retiredUntilMs: leaseEnd })).toBe(0);
    expect(await lua.scripts.run('quotaExtend', { quota, quotaSlotId: 'b', expiresAtMs: leaseEnd })).toBe(2);
    expect(await lua.scripts.run('quotaFree', { quota, quotaSlotId: 'c', retiredUntilMs: Date.now() - 1_000 })).toBe(0);
    expect(await lua.raw.zscore(quota.ends, 'u:c')).toBeNull();
    // Reserved anew under a retired id: counted again, as any reservation.
    expect(await lua.scripts.run('quotaReserve', { quota, quotaSlotId: 'a', ttlMs: 1_000, maxQuotaSlots: 2 })).toEqual([1]);
    expect(await counted(quota)).toBe(1);
    expect(Number.isInteger(Number(await lua.raw.zscore(quota.ends, 'u:a')))).toBe(true);
  });
});

describe('change notices (_watch.lua)', () => {
  /** Counts the messages on the lock's change channel while `run` runs. */
  async function notices(run: () => Promise<unknown>): Promise<number> {
    const sub = lua.server.client();
    const channel = space.changeChannel(lockName);
    let count = 0;
    const marker = new Promise<void>((resolve) =>
      sub.on('message', (_c: string, message: string) => (message === 'marker' ? resolve() : count++)),
    );
    await sub.subscribe(channel);
    // As RedisStore.watchChanges does: subscribed, then the lock is marked as watched.
    await lua.scripts.run('watchMark', { lockKey: keys.lock, keepMs: 10_000 });
    try {
      await run();
      // Messages on one channel arrive in order: every notice of `run` comes before this marker.
      await lua.raw.publish(channel, 'marker');
      await marker;
      return count;
    } finally {
      sub.disconnect();
    }
  }

  it('one PUBLISH per grant, per release (with its hand-over), per force release; none for renew or a refusal', async () => {
    expect(await notices(() => acquire('owner-1'))).toBe(1);
    expect(await notices(() => acquire('owner-2'))).toBe(0);
    expect(
      await notices(() =>
        lua.scripts.run('renew', { lockKey: keys.lock, quota: keys.quota, ownerToken: 'owner-1', ttlMs: 10_000, graceMs: GRACE_MS }),
      ),
    ).toBe(0);
    await acquire('owner-2', { waitMs: 5_000, waiterId: 'w1' });
    expect(await notices(() => release('owner-1'))).toBe(1);
    expect(await notices(() => lua.scripts.run('forceRelease', { ...handOver, lockName, keys }))).toBe(1);
  });

  it('no PUBLISH for a lock nobody marked as watched; watch-mark says whether the mark was still there', async () => {
    const sub = lua.server.client();
    let count = 0;
    sub.on('message', () => count++);
    await sub.subscribe(space.changeChannel(lockName));
    try {
      await acquire('owner-1');
      await release('owner-1');
      await lua.raw.publish(space.changeChannel(lockName), 'marker');
      await vi.waitFor(() => expect(count).toBe(1));
    } finally {
      sub.disconnect();
    }
    expect(await lua.scripts.run('watchMark', { lockKey: keys.lock, keepMs: 200 })).toBe(0);
    expect(await lua.scripts.run('watchMark', { lockKey: keys.lock, keepMs: 200 })).toBe(1);
    // Probing with a 1 ms mark never extends a longer one: it is found run out once 200 ms have passed.
    await vi.waitFor(async () => expect(await lua.scripts.run('watchMark', { lockKey: keys.lock, keepMs: 1 })).toBe(0), {
      timeout: 10_000,
    });
  });

  it('the lock hash outlives its watch mark and its queue flag, whatever the lease', async () => {
    await lua.scripts.run('watchMark', { lockKey: keys.lock, keepMs: GRACE_MS * 3 });
    await acquire('owner-1');
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThan(GRACE_MS * 2);
    await release('owner-1');
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThan(GRACE_MS * 2);
    // A queue: the hash says so (q) until the queue's end, and lives as long.
    await acquire('owner-2');
    await acquire('owner-3', { waitMs: GRACE_MS * 5, waiterId: 'w1' });
    const q = Number(await lockField(lua.raw, keys.lock, 'q'));
    expect(q).toBeGreaterThan(Date.now() + GRACE_MS * 4);
    expect(await lua.raw.pttl(keys.lock)).toBeGreaterThanOrEqual(Number(await lua.raw.pttl(keys.queue)) - 5);
    // Handed on, then released with nobody left: the flag goes, and later calls do not look again.
    expect(await release('owner-2')).toBe(1);
    expect(await lockField(lua.raw, keys.lock, 'o')).toBe('owner-3');
    expect(await release('owner-3')).toBe(1);
    expect(await lockField(lua.raw, keys.lock, 'q')).toBeNull();
  });
});

describe('lock-delay (_delay.lua in acquire.lua, lock-delay.lua)', () => {
  const acquireWithDelay = (ownerToken: string, ttlMs: number, lockDelayMs: number) =>
    lua.scripts.run('acquire', {
      ...handOver,
      lockName,
      keys,
      ownerToken,
      ttlMs,
      holder: '',
      idempotencyKey: '',
      waitMs: 0,
      waiterId: '-',
      instanceId: 'inst-a',
      maxWaiters: 10,
      livenessMs: 3_000,
      maxQuotaSlots: 0,
      lockDelayMs,
    });

  it('an expired lease keeps the lock for its delay ({0, retryAfterMs}); inspect says how long; a release ends it', async () => {
    expect(await acquireWithDelay('owner-1', 100, 5_000)).toEqual([1, int, int]);
    await sleep(150);
    const [kind, retryAfter] = (await acquireWithDelay('owner-2', 1_000, 0)) as number[];
    expect(kind).toBe(0);
    expect(retryAfter).toBeGreaterThan(4_000);
    const free = (await lua.scripts.run('inspect', { keys })) as number[];
    expect(free[0]).toBe(0);
    expect(free[2]).toBeGreaterThan(4_000);
    // Released before it expires: no delay.
    const other = space.lockKeys(`${lockName}-b`);
    const raw2 = await lua.scripts.run('acquire', {
      ...handOver,
      lockName: `${lockName}-b`,
      keys: other,
      ownerToken: 'o',
      ttlMs: 5_000,
      holder: '',
      idempotencyKey: '',
      waitMs: 0,
      waiterId: '-',
      instanceId: 'inst-a',
      maxWaiters: 10,
      livenessMs: 3_000,
      maxQuotaSlots: 0,
      lockDelayMs: 5_000,
    });
    expect(raw2).toEqual([1, int, int]);
    expect(await lua.scripts.run('release', { ...handOver, lockName: `${lockName}-b`, keys: other, ownerToken: 'o' })).toBe(1);
    expect(
      await lua.scripts.run('acquire', {
        ...handOver,
        lockName: `${lockName}-b`,
        keys: other,
        ownerToken: 'p',
        ttlMs: 5_000,
        holder: '',
        idempotencyKey: '',
        waitMs: 0,
        waiterId: '-',
        instanceId: 'inst-a',
        maxWaiters: 10,
        livenessMs: 3_000,
        maxQuotaSlots: 0,
      }),
    ).toEqual([1, int, int]);
  });

  it('lock-delay.lua: 1 sets the delay of a live lease of this owner (tagged with the owner); 0 otherwise', async () => {
    await acquire('owner-1');
    expect(await lua.scripts.run('lockDelay', { lockKey: keys.lock, ownerToken: 'someone', lockDelayMs: 1_000 })).toBe(0);
    expect(await lua.scripts.run('lockDelay', { lockKey: keys.lock, ownerToken: 'owner-1', lockDelayMs: 1_000 })).toBe(1);
    // The delay names its lease's owner: left in the hash after that lease, it never applies to a later one.
    expect(await lockField(lua.raw, keys.lock, 'd')).toBe('owner-1|1000');
  });
});

describe('lock-set scripts', () => {
  const member = (name: string) => ({ keys: space.lockKeys(`ns/${lockName}-${name}`), name: `ns/${lockName}-${name}` });
  const setAcquire = (ownerToken: string, names: string[]) =>
    lua.scripts.run('lockSetAcquire', {
      members: names.map(member),
      ownerToken,
      ttlMs: 10_000,
      holder: 'h',
      graceMs: GRACE_MS,
      lockDelayMs: 0,
      channelPrefix: CHANNELS,
    });

  it('lock-set-acquire: {1, expiresAtMs, tokens...} for all; {0, retryAfterMs, busyIndex} and nothing taken when one is busy', async () => {
    expect(await setAcquire('set-1', ['a', 'b'])).toEqual([1, int, int, int]);
    const refused = (await setAcquire('set-2', ['c', 'b'])) as number[];
    expect(refused[0]).toBe(0);
    expect(refused[2]).toBe(1);
    expect(await lua.raw.exists(member('c').keys.lock)).toBe(0);
    expect(await lockField(lua.raw, member('a').keys.lock, 'o')).toBe('set-1');
  });

  it('lock-set-renew: {1, expiresAtMs, tokens...} only when the token holds every key; {0} and nothing changed otherwise', async () => {
    const [, , ta, tb] = (await setAcquire('set-1', ['a', 'b'])) as number[];
    const lockKeys = ['a', 'b'].map((x) => member(x).keys.lock);
    expect(await lua.scripts.run('lockSetRenew', { lockKeys, ownerToken: 'set-1', ttlMs: 20_000, graceMs: GRACE_MS })).toEqual([
      1,
      int,
      ta,
      tb,
    ]);
    expect(
      await lua.scripts.run('lockSetRenew', {
        lockKeys: [...lockKeys, member('z').keys.lock],
        ownerToken: 'set-1',
        ttlMs: 20_000,
        graceMs: GRACE_MS,
      }),
    ).toEqual([0]);
  });

  it('lock-set-release: 1 frees every key the token holds; 0 when it holds none', async () => {
    await setAcquire('set-1', ['a', 'b']);
    const release = (ownerToken: string) =>
      lua.scripts.run('lockSetRelease', { members: ['a', 'b'].map(member), ownerToken, graceMs: GRACE_MS, channelPrefix: CHANNELS });
    expect(await release('other')).toBe(0);
    expect(await release('set-1')).toBe(1);
    expect(await lockField(lua.raw, member('a').keys.lock, 'o')).toBeNull();
    expect(await release('set-1')).toBe(0);
  });
});

describe('rate-allowance.lua, through RedisRateAllowance (the rate limiter shared by instances)', () => {
  it('{granted, windowLeftMs, handedOut}: batches from one window until the limit, each caller its own window', async () => {
    const clients = [lua.server.client(), lua.server.client()] as const;
    const [first, second] = clients.map((client) => new RedisRateAllowance(client, 'lua:')) as [RedisRateAllowance, RedisRateAllowance];
    const rateKey = `key:${lockName}`;
    try {
      const a = await first.handOut(rateKey, 4, 10, 60_000);
      expect(a).toEqual({ granted: 4, windowLeftMs: int, handedOut: 4 });
      expect(a.windowLeftMs).toBeGreaterThan(0);
      expect(a.windowLeftMs).toBeLessThanOrEqual(60_000);
      // Another instance draws from the same window: only what is left of the limit.
      expect(await second.handOut(rateKey, 8, 10, 60_000)).toMatchObject({ granted: 6, handedOut: 10 });
      expect(await first.handOut(rateKey, 1, 10, 60_000)).toMatchObject({ granted: 0, handedOut: 10 });
      // The counter lives under the key space's rate-limit key, and another caller's window is untouched.
      expect(await lua.raw.get(space.rateWindow(rateKey))).toBe('10');
      expect(await second.handOut(`${rateKey}-other`, 3, 10, 60_000)).toMatchObject({ granted: 3, handedOut: 3 });
    } finally {
      for (const client of clients) client.disconnect();
    }
  });
});

describe('the script table on the connection', () => {
  it('the echo wrapper takes the nonce off ARGV before the body runs: the body sees its arguments alone', async () => {
    // A body that reads #ARGV (the heartbeat's waiter pairs) would otherwise take the nonce for one of its own.
    const reply = await lua.raw.eval(withEcho('return {#ARGV, ARGV[#ARGV]}'), 0, 'a', 'b', 'the-nonce');
    expect(reply).toEqual(['the-nonce', [2, 'b']]);
  });

  /** Calls of a command since the last CONFIG RESETSTAT: answered, failed and rejected (refused before it ran). */
  async function callsOf(command: string): Promise<{ calls: number; failed: number; rejected: number }> {
    const info = await lua.raw.info('commandstats');
    const stat = (field: string) => Number(new RegExp(`cmdstat_${command}:.*\\b${field}=(\\d+)`).exec(info)?.[1] ?? 0);
    return { calls: stat('calls'), failed: stat('failed_calls'), rejected: stat('rejected_calls') };
  }

  async function evalCalls(): Promise<{ eval: number; evalsha: number; evalshaFailed: number }> {
    const [evalStats, evalsha] = [await callsOf('eval'), await callsOf('evalsha')];
    return { eval: evalStats.calls, evalsha: evalsha.calls, evalshaFailed: evalsha.failed };
  }

  const inspect = () => lua.scripts.run('inspect', { keys });

  it('a script cache flushed under the open connection costs one NOSCRIPT, answered by sending the source again', async () => {
    // inspect runs as a script (EVAL, then EVALSHA on this socket); the lock pair runs as functions (below).
    expect(await inspect()).toEqual([0, 0, 0]);
    await lua.raw.script('FLUSH');
    await lua.raw.config('RESETSTAT');
    // The script's first call after the flush is refused NOSCRIPT and sent again with its source.
    expect(await inspect()).toEqual([0, 0, 0]);
    expect(await evalCalls()).toMatchObject({ eval: 1, evalshaFailed: 1 });
    // From then on, the script is called by its hash alone.
    expect(await inspect()).toEqual([0, 0, 0]);
    expect(await evalCalls()).toMatchObject({ eval: 1, evalsha: 2, evalshaFailed: 1 });
  });

  describe('the lock pair and renew as Redis functions (FUNCTION_SCRIPTS)', () => {
    const pairOn = async (scripts: Scripts, owner: string) => ({
      granted: await acquire(owner, { scripts }),
      released: await scripts.run('release', { ...handOver, lockName, keys, ownerToken: owner }),
    });

    it('called with FCALL once a connection has sent the library (FUNCTION LOAD, once per connection)', async () => {
      const client = lua.server.client();
      try {
        const scripts = defineScripts(client);
        await lua.raw.config('RESETSTAT');
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        expect(await callsOf('fcall')).toEqual({ calls: 4, failed: 0, rejected: 0 });
        expect(await evalCalls()).toEqual({ eval: 0, evalsha: 0, evalshaFailed: 0 });
        // This connection's load: another connection (the file's own) loaded this version first, so Redis
        // answered "already exists", which is as good.
        expect((await callsOf('function\\|load')).calls).toBe(1);
        const library = functionLibrary();
        const listed = (await lua.raw.call('FUNCTION', 'LIST', 'LIBRARYNAME', library.name)) as unknown[];
        expect(listed).toHaveLength(1);
      } finally {
        client.disconnect();
      }
    });

    it('what the library keeps between calls (digits made, owner tokens converted) reads right past the 256 it keeps at once', async () => {
      // Each pair: a token never seen (its acquire converts it, its release finds it kept) and numbers
      // never formatted (the lease length, so the record's expiry), 150 times over: the kept values
      // start again more than once on the way.
      for (let i = 0; i < 150; i++) {
        const owner = newOwnerToken();
        const ttlMs = 10_000 + i * 7;
        expect(await acquire(owner, { ttlMs })).toEqual([1, int, int]);
        expect(await lockField(lua.raw, keys.lock, 'o')).toBe(owner);
        const pttl = await lua.raw.pttl(keys.lock);
        expect(pttl).toBeLessThanOrEqual(ttlMs + GRACE_MS);
        expect(pttl).toBeGreaterThan(ttlMs + GRACE_MS - 1_000);
        expect(await release(owner)).toBe(1);
        expect(await lockField(lua.raw, keys.lock, 'o')).toBeNull();
      }
    });

    it('a library flushed under the open connection costs one refused FCALL, answered as an EVAL, and is sent again', async () => {
      const client = lua.server.client();
      try {
        const scripts = defineScripts(client);
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        await lua.raw.call('FUNCTION', 'FLUSH');
        await lua.raw.config('RESETSTAT');
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        const fcall = await callsOf('fcall');
        // The acquire's FCALL is refused (the library is gone) and answered through EVAL; the release is
        // written after the library was sent again, and is an FCALL.
        expect(fcall.calls).toBe(2);
        expect(fcall.failed + fcall.rejected).toBe(1);
        expect((await callsOf('eval')).calls).toBe(1);
        expect((await callsOf('function\\|load')).calls).toBe(1);
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        expect((await callsOf('fcall')).calls).toBe(4);
      } finally {
        client.disconnect();
      }
    });

    it('over maxmemory (noeviction), a permit release, which frees memory before it writes any, still goes through as it does as a script', async () => {
      // FCALL of a function without flags is refused up front when Redis is over maxmemory; a script is
      // refused only at a first write that may add memory, and a permit release's first write is an HDEL.
      const client = lua.server.client();
      const permitKeys = space.permitKeys('semaphore', `ns/${lockName}`);
      const permit = { ...handOver, lockName, keys: permitKeys };
      const owner = newOwnerToken();
      try {
        const scripts = defineScripts(client);
        const granted = await scripts.run('permitAcquire', {
          ...permit,
          ownerToken: owner,
          ttlMs: 60_000,
          holder: '',
          weight: 1,
          capacity: 2,
          waitMs: 0,
          waiterId: '-',
          instanceId: 'inst-a',
          maxWaiters: 2,
          livenessMs: 3_000,
        });
        expect(granted).toEqual([1, int, int]);
        await lua.raw.config('SET', 'maxmemory', '1');
        try {
          expect(await scripts.run('permitRelease', { ...permit, ownerToken: owner })).toBe(1);
        } finally {
          await lua.raw.config('SET', 'maxmemory', '0');
        }
        expect(await lua.raw.hget(permitKeys.pool, `o:${owner}`)).toBeNull();
      } finally {
        client.disconnect();
      }
    });

    it('while Redis refuses writes (NOREPLICAS), an acquire of a held lock, which writes nothing, answers held as a script does', async () => {
      // FCALL of a function without flags is refused up front while writes are refused; a script only at
      // its first write. The caller is told the lock is held (and when to come back), not that the store failed.
      const client = lua.server.client();
      try {
        const scripts = defineScripts(client);
        expect(await acquire(newOwnerToken(), { scripts })).toEqual([1, int, int]);
        await lua.raw.config('SET', 'min-replicas-to-write', '1');
        try {
          expect(await acquire(newOwnerToken(), { scripts })).toEqual([0, int]);
        } finally {
          await lua.raw.config('SET', 'min-replicas-to-write', '0');
        }
      } finally {
        client.disconnect();
      }
    });

    // A load refused for the moment (Redis refuses every write while it lasts) leaves functions on.
    const refusedForNow: Array<[string, string, string, string, RegExp]> = [
      ['over maxmemory', 'maxmemory', '1', '0', /OOM/],
      ['a primary without a replica in sync: NOREPLICAS', 'min-replicas-to-write', '1', '0', /NOREPLICAS/],
    ];
    for (const [what, setting, refusing, normal, refusal] of refusedForNow) {
      it(`a load refused for the moment (${what}) is sent again once Redis takes writes, and the pair is then called with FCALL`, async () => {
        const client = lua.server.client();
        try {
          const scripts = defineScripts(client);
          await lua.raw.call('FUNCTION', 'FLUSH');
          await lua.raw.config('SET', setting, refusing);
          try {
            // The load and the acquire are both refused.
            await expect(pairOn(scripts, newOwnerToken())).rejects.toThrow(refusal);
          } finally {
            await lua.raw.config('SET', setting, normal);
          }
          // The first calls once writes are taken may still go as scripts (the refused load's pause).
          await vi.waitFor(
            async () => {
              await lua.raw.config('RESETSTAT');
              expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
              expect(await callsOf('fcall')).toEqual({ calls: 2, failed: 0, rejected: 0 });
            },
            { timeout: 10_000, interval: 100 },
          );
          expect(await evalCalls()).toEqual({ eval: 0, evalsha: 0, evalshaFailed: 0 });
          const listed = (await lua.raw.call('FUNCTION', 'LIST', 'LIBRARYNAME', functionLibrary().name)) as unknown[];
          expect(listed).toHaveLength(1);
        } finally {
          client.disconnect();
        }
      });
    }

    it('where FUNCTION and FCALL are not allowed (an ACL without them, as on a Redis before 7), the pair runs as scripts', async () => {
      await lua.raw.call('ACL', 'SETUSER', 'scripts-only', 'on', 'nopass', '~*', '&*', '+@all', '-function', '-fcall');
      const url = new URL(lua.server.url);
      url.username = 'scripts-only';
      const client = new Redis(url.toString());
      try {
        const scripts = defineScripts(client);
        await lua.raw.config('RESETSTAT');
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        expect(await pairOn(scripts, newOwnerToken())).toEqual({ granted: [1, int, int], released: 1 });
        // At most the first call went as an FCALL (written behind the refused load) and was refused before
        // it ran; every other call went as a script.
        const fcall = await callsOf('fcall');
        expect(fcall.calls).toBe(0);
        expect(fcall.rejected).toBeLessThanOrEqual(1);
        expect((await callsOf('evalsha')).calls).toBe(2);
      } finally {
        client.disconnect();
        await lua.raw.call('ACL', 'DELUSER', 'scripts-only');
      }
    });
  });

  it('a call hands its arguments to the command as built: no Array.prototype.flat copy (about 3 us per acquire on Node 20)', async () => {
    const flat = vi.spyOn(Array.prototype, 'flat');
    let acquired: Promise<unknown>;
    let released: Promise<unknown>;
    /** The length of each array flat was called on (read before mockRestore, which clears them). */
    let copied: number[];
    try {
      // Each call builds and writes its command before its first await: spied on that part alone.
      acquired = acquire('owner-flat');
      released = release('owner-flat');
      copied = flat.mock.contexts.map((list) => (list as unknown[]).length);
    } finally {
      flat.mockRestore();
    }
    expect(await acquired).toEqual([1, int, int]);
    expect(await released).toEqual(1);
    // ioredis's constructor is handed no arguments (it copies that empty list): no call copies any.
    expect(copied).toContain(0);
    expect(copied.filter((length) => length > 0)).toEqual([]);
  });
});
