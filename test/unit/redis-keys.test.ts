import { Command } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { PERMIT_KINDS, type PermitKind } from '../../src/domain/permit-values.js';
import { historyKindLetter, KeySpace, permitKindLetter, QUOTA_SHARDS, splitId } from '../../src/store/redis/keys.js';
import { SCRIPTS, type ScriptName } from '../../src/store/redis/scripts.js';

const space = new KeySpace('kh:');

const slotOf = (key: string | number) => new Command('exists', [String(key)]).getSlot();

/** The shard tag every key of lock id `ns/name` carries. */
const tagOf = (ns: string, name: string) => space.shardTags(ns)[space.shardOf(name)];

describe('Redis key names', () => {
  it("tags every key of one lock with its namespace shard, and the shard's quota with the same tag", () => {
    const tag = tagOf('team-a', 'orders:1');
    expect(tag).toMatch(/^team-a#\d+$/);
    const keys = space.lockKeys('team-a/orders:1');
    expect(keys).toEqual({
      lock: `kh:{${tag}}/orders:1`,
      queue: `kh:{${tag}}q/orders:1`,
      waiters: `kh:{${tag}}w/orders:1`,
      quota: { count: `kh:{${tag}}Q`, ends: `kh:{${tag}}E` },
    });
    expect(space.lock('plain')).toBe(`kh:{${space.shardTags('plain')[space.shardOf('')]}}`);
  });

  it("spreads a namespace's shards over evenly spaced ranges of the Cluster slots, and its keys over the shards", () => {
    for (const ns of ['team-a', 'bench', 'x', 'a-much-longer-namespace.name_1']) {
      const ranges = space.shardTags(ns).map((tag) => Math.floor((slotOf(`{${tag}}`) * QUOTA_SHARDS) / 16384));
      expect(ranges).toEqual(Array.from({ length: QUOTA_SHARDS }, (_v, i) => i));
    }
    const perShard = new Array<number>(QUOTA_SHARDS).fill(0);
    for (let i = 0; i < 16_000; i++) perShard[space.shardOf(`key-${i}`)]! += 1;
    for (const n of perShard) expect(n).toBeGreaterThan(800);
  });

  it("names a lock's keys in lockKeys exactly as one by one, whatever the id's shape", () => {
    for (const id of ['team-a/orders:1', 'team-a/x/y', 'plain', 'ns/', '/lead']) {
      const tag = space.shardTags(splitId(id).group)[space.shardOf(splitId(id).name)]!;
      expect(space.lockKeys(id)).toEqual({
        lock: space.lock(id),
        queue: space.tagged(id, 'q'),
        waiters: space.tagged(id, 'w'),
        quota: { count: `kh:{${tag}}Q`, ends: `kh:{${tag}}E` },
      });
    }
  });

  it('reads the lock id back from a lock hash, and never from a queue, a waiter hash or a quota key', () => {
    for (const id of ['team-a/orders:1', 'team-a/a:q', 'plain', 'ns/x']) {
      expect(space.lockIdOf(space.lock(id))).toBe(id);
      expect(space.lockIdOf(space.lockKeys(id).queue)).toBeNull();
      expect(space.lockIdOf(space.lockKeys(id).waiters)).toBeNull();
      expect(space.lockIdOf(space.lockKeys(id).quota.count)).toBeNull();
      expect(space.lockIdOf(space.lockKeys(id).quota.ends)).toBeNull();
    }
    expect(space.lockIdOf('other:{team-a#1}/x')).toBeNull();
    // The layout before shards (tag = the namespace alone) is not read as a lock of this one.
    expect(space.lockIdOf('kh:{team-a}/x')).toBeNull();
  });

  it('builds SCAN patterns that match only the ids under the prefix', () => {
    expect(space.lockPattern('team-a/ord')).toBe('kh:{team-a#*}/ord*');
    expect(space.lockPattern('team')).toBe('kh:{team*');
    expect(space.lockPattern('te*m/')).toBe('kh:{te\\*m#*}/*');
  });

  it('gives semaphores and read/write locks their own kinds in the namespace slot, told apart from locks and each other', () => {
    expect(space.permitKeys('semaphore', 'team-a/checkout')).toEqual({
      pool: `kh:{${tagOf('team-a', 'checkout')}}s/checkout`,
      queue: `kh:{${tagOf('team-a', 'checkout')}}sq/checkout`,
      waiters: `kh:{${tagOf('team-a', 'checkout')}}sw/checkout`,
      expiries: `kh:{${tagOf('team-a', 'checkout')}}se/checkout`,
    });
    expect(space.permitKeys('rwlock', 'team-a/config').pool).toBe(`kh:{${tagOf('team-a', 'config')}}r/config`);
    const sem = space.permitKeys('semaphore', 'team-a/x');
    expect(space.lockIdOf(sem.pool, 's')).toBe('team-a/x');
    expect(space.lockIdOf(sem.pool)).toBeNull();
    expect(space.lockIdOf(sem.pool, 'r')).toBeNull();
    for (const other of [sem.queue, sem.waiters, sem.expiries, space.lock('team-a/x')]) expect(space.lockIdOf(other, 's')).toBeNull();
    expect(space.lockPattern('team-a/ch', 's')).toBe('kh:{team-a#*}s/ch*');
  });

  it('keeps every kind of PERMIT_KINDS, and any later one, apart: no key of one kind is a key of another or of a lock', () => {
    // The kinds there are, and later ones (the rule that names them is what a new kind relies on): a kind
    // that is another's name plus a suffix letter (q, w, e) too.
    const kinds = [...new Set([...PERMIT_KINDS, ...(['pool', 'poolq', 'poole', 'p', 'q'] as unknown as PermitKind[])])];
    for (const id of ['team-a/x', 'plain']) {
      const owner = new Map<string, string>();
      const claim = (key: string, who: string) => {
        expect(owner.get(key), `${key}: ${who} and ${owner.get(key)}`).toBeUndefined();
        owner.set(key, who);
      };
      const lock = space.lockKeys(id);
      for (const key of [lock.lock, lock.queue, lock.waiters, space.tagged(id, historyKindLetter('lock'))]) claim(key, 'lock');
      for (const kind of kinds) {
        const keys = space.permitKeys(kind, id);
        for (const key of [keys.pool, keys.queue, keys.waiters, keys.expiries, space.tagged(id, historyKindLetter(kind))]) claim(key, kind);
        // A listing of one kind finds only its own pools.
        for (const other of kinds)
          expect(space.lockIdOf(keys.pool, permitKindLetter(other)), `${kind} as ${other}`).toBe(other === kind ? id : null);
        expect(space.lockIdOf(keys.pool)).toBeNull();
      }
    }
    // The deployed kinds keep their letters (their data is stored under them).
    expect([permitKindLetter('semaphore'), permitKindLetter('rwlock'), historyKindLetter('lock')]).toEqual(['s', 'r', 'hl']);
    expect([historyKindLetter('semaphore'), historyKindLetter('rwlock')]).toEqual(['hs', 'hr']);
  });

  it("every script touches keys of one Cluster slot: the lock's shard (and its quota)", () => {
    for (const id of ['team-a/orders:1', 'team-a/x/y', 'plain']) {
      const keys = space.lockKeys(id);
      const permit = space.permitKeys('semaphore', id);
      const hand = { graceMs: 1, channelPrefix: 'kh:grants:', lockName: id };
      // A lock set's second key: of the same shard (on a Cluster, a set must be; see RedisStore).
      let second = id;
      for (let i = 0; id.includes('/') && second === id; i++) {
        const candidate = `${id}-${i}`;
        if (space.shardOf(candidate.slice(id.indexOf('/') + 1)) === space.shardOf(id.slice(id.indexOf('/') + 1))) second = candidate;
      }
      const args: { [N in ScriptName]: Parameters<(typeof SCRIPTS)[N]['args']>[0] } = {
        acquire: {
          ...hand,
          keys,
          ownerToken: 'o',
          ttlMs: 1,
          holder: '',
          waitMs: 0,
          waiterId: '-',
          instanceId: 'i',
          maxWaiters: 1,
          livenessMs: 1,
          idempotencyKey: '',
          maxQuotaSlots: 1,
        },
        renew: { lockKey: keys.lock, quota: keys.quota, ownerToken: 'o', ttlMs: 1, graceMs: 1 },
        release: { ...hand, keys, ownerToken: 'o' },
        inspect: { keys },
        cancel: { keys, waiterId: 'w', ownerToken: 'o' },
        heartbeat: { ...hand, keys, livenessMs: 1, waiters: [{ id: 'w', ownerToken: 'o' }] },
        forceRelease: { ...hand, keys },
        requestRelease: { lockKey: keys.lock, fencingToken: 1, payload: '["k",null]', channelPrefix: hand.channelPrefix, lockName: 'k' },
        permitRequestRelease: { keys: permit, fencingToken: 1, payload: '["k",null]', channelPrefix: hand.channelPrefix },
        quotaReserve: { quota: space.quotaFor('team-a', 's', 1), quotaSlotId: 's', ttlMs: 1, maxQuotaSlots: 1 },
        quotaExtend: { quota: space.quotaFor('team-a', 's', 1), quotaSlotId: 's', expiresAtMs: 1 },
        quotaFree: { quota: space.quotaFor('team-a', 's', 1), quotaSlotId: 's' },
        quotaAdd: { quota: keys.quota, endMs: 1, quotaSlotId: '' },
        lockDelay: { lockKey: keys.lock, ownerToken: 'o', lockDelayMs: 1 },
        watchMark: { lockKey: keys.lock, keepMs: 1 },
        lockSetAcquire: {
          members: [
            { keys, name: id },
            { keys: space.lockKeys(second), name: second },
          ],
          ownerToken: 'o',
          ttlMs: 1,
          holder: '',
          graceMs: 1,
          lockDelayMs: 0,
          channelPrefix: 'kh:grants:',
        },
        lockSetRenew: { lockKeys: [keys.lock, space.lock(second)], ownerToken: 'o', ttlMs: 1, graceMs: 1 },
        lockSetRelease: {
          members: [
            { keys, name: id },
            { keys: space.lockKeys(second), name: second },
          ],
          ownerToken: 'o',
          graceMs: 1,
          channelPrefix: 'kh:grants:',
        },
        rateAllowance: { windowKey: space.rateWindow('key:k'), windowMs: 1, max: 1, wanted: 1 },
        permitAcquire: {
          ...hand,
          keys: permit,
          ownerToken: 'o',
          ttlMs: 1,
          holder: '',
          weight: 1,
          capacity: 1,
          waitMs: 0,
          waiterId: '-',
          instanceId: 'i',
          maxWaiters: 1,
          livenessMs: 1,
        },
        permitRenew: { keys: permit, ownerToken: 'o', ttlMs: 1, graceMs: 1 },
        permitRelease: { ...hand, keys: permit, ownerToken: 'o' },
        permitCancel: { ...hand, keys: permit, waiterId: 'w', ownerToken: 'o' },
        permitHeartbeat: { ...hand, keys: permit, livenessMs: 1, waiters: [{ id: 'w', ownerToken: 'o' }] },
        permitInspect: { keys: permit, shown: 1 },
        permitForceRelease: { ...hand, keys: permit },
        queue: { keys, limit: 1, layout: 'lock' },
      };
      for (const name of Object.keys(args) as ScriptName[]) {
        const spec = SCRIPTS[name];
        const built = (spec.args as (a: unknown) => (string | number)[])(args[name]);
        // A variable key count (lock sets) comes first in the arguments.
        const keyArgs = spec.numberOfKeys < 0 ? built.slice(1, 1 + Number(built[0])) : built.slice(0, spec.numberOfKeys);
        const slots = new Set(keyArgs.map(slotOf));
        expect(slots.size, name).toBe(1);
      }
      // A lock set's scripts are told each lock's name too: a hand-over they announce names its lock.
      for (const name of ['lockSetAcquire', 'lockSetRelease'] as const) {
        const built = (SCRIPTS[name].args as (a: unknown) => (string | number)[])(args[name]);
        expect(built.slice(-2), name).toEqual([id, second]);
      }
      expect(slotOf(keys.lock)).toBe(slotOf(keys.quota.count));
    }
  });
});
