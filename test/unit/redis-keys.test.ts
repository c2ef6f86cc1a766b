import { Command } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';
import { SCRIPTS, type ScriptName } from '../../src/store/redis/scripts.js';

const space = new KeySpace('kh:');

describe('Redis key names', () => {
  it('tags every key of one namespace with the namespace, so they share a Cluster slot', () => {
    const keys = space.lockKeys('team-a/orders:1');
    expect(keys).toEqual({ lock: 'kh:{team-a}/orders:1', queue: 'kh:{team-a}q/orders:1', waiters: 'kh:{team-a}w/orders:1', slots: 'kh:slots:{team-a}' });
    expect(space.slots('team-a')).toBe('kh:slots:{team-a}');
    expect(space.lock('plain')).toBe('kh:{plain}');
  });

  it('reads the lock id back from a lock hash, and never from a queue, a waiter hash or a slot set', () => {
    for (const id of ['team-a/orders:1', 'team-a/a:q', 'plain', 'ns/x']) {
      expect(space.lockIdOf(space.lock(id))).toBe(id);
      expect(space.lockIdOf(space.lockKeys(id).queue)).toBeNull();
      expect(space.lockIdOf(space.lockKeys(id).waiters)).toBeNull();
    }
    expect(space.lockIdOf(space.slots('team-a'))).toBeNull();
    expect(space.lockIdOf('other:{team-a}/x')).toBeNull();
  });

  it('builds SCAN patterns that match only the ids under the prefix', () => {
    expect(space.lockPattern('team-a/ord')).toBe('kh:{team-a}/ord*');
    expect(space.lockPattern('team')).toBe('kh:{team*');
    expect(space.lockPattern('te*m/')).toBe('kh:{te\\*m}/*');
  });

  it('gives semaphores and read/write locks their own kinds in the namespace slot, told apart from locks and each other', () => {
    expect(space.permitKeys('semaphore', 'team-a/checkout')).toEqual({
      pool: 'kh:{team-a}s/checkout',
      queue: 'kh:{team-a}sq/checkout',
      waiters: 'kh:{team-a}sw/checkout',
      expiries: 'kh:{team-a}se/checkout',
    });
    expect(space.permitKeys('rwlock', 'team-a/config').pool).toBe('kh:{team-a}r/config');
    const sem = space.permitKeys('semaphore', 'team-a/x');
    expect(space.lockIdOf(sem.pool, 's')).toBe('team-a/x');
    expect(space.lockIdOf(sem.pool)).toBeNull();
    expect(space.lockIdOf(sem.pool, 'r')).toBeNull();
    for (const other of [sem.queue, sem.waiters, sem.expiries, space.lock('team-a/x')]) expect(space.lockIdOf(other, 's')).toBeNull();
    expect(space.lockPattern('team-a/ch', 's')).toBe('kh:{team-a}s/ch*');
  });

  it('every script touches keys of one Cluster slot: the lock id\'s namespace (and its quota slots)', () => {
    const slotOf = (key: string | number) => new Command('exists', [String(key)]).getSlot();
    for (const id of ['team-a/orders:1', 'team-a/x/y', 'plain']) {
      const keys = space.lockKeys(id);
      const permit = space.permitKeys('semaphore', id);
      const hand = { graceMs: 1, channelPrefix: 'kh:grants:', lockName: id };
      // A lock set's second key: of the same namespace (the service composes every id with one).
      const second = id.includes('/') ? `${id}-2` : id;
      const args: { [N in ScriptName]: Parameters<(typeof SCRIPTS)[N]['args']>[0] } = {
        acquire: { ...hand, keys, ownerToken: 'o', ttlMs: 1, holder: '', waitMs: 0, waiterId: '-', instanceId: 'i', maxWaiters: 1, livenessMs: 1, idempotencyKey: '', maxSlots: 1 },
        renew: { lockKey: keys.lock, slotsKey: keys.slots, ownerToken: 'o', ttlMs: 1, graceMs: 1 },
        release: { ...hand, keys, ownerToken: 'o' },
        inspect: { keys },
        cancel: { keys, waiterId: 'w', ownerToken: 'o' },
        heartbeat: { ...hand, keys, livenessMs: 1, waiters: [{ id: 'w', ownerToken: 'o' }] },
        forceRelease: { ...hand, keys },
        slotReserve: { slotsKey: space.slots('team-a'), slotId: 's', ttlMs: 1, maxSlots: 1 },
        slotExtend: { slotsKey: space.slots('team-a'), slotId: 's', expiresAtMs: 1 },
        lockDelay: { lockKey: keys.lock, ownerToken: 'o', lockDelayMs: 1 },
        watchMark: { lockKey: keys.lock, keepMs: 1 },
        lockSetAcquire: { members: [{ keys, name: id }, { keys: space.lockKeys(second), name: second }], ownerToken: 'o', ttlMs: 1, holder: '', graceMs: 1, lockDelayMs: 0, channelPrefix: 'kh:grants:' },
        lockSetRenew: { lockKeys: [keys.lock, space.lock(second)], ownerToken: 'o', ttlMs: 1, graceMs: 1 },
        lockSetRelease: { members: [{ keys, name: id }, { keys: space.lockKeys(second), name: second }], ownerToken: 'o', graceMs: 1, channelPrefix: 'kh:grants:' },
        rateLease: { windowKey: space.rateWindow('key:k'), windowMs: 1, max: 1, wanted: 1 },
        permitAcquire: { ...hand, keys: permit, ownerToken: 'o', ttlMs: 1, holder: '', weight: 1, capacity: 1, waitMs: 0, waiterId: '-', instanceId: 'i', maxWaiters: 1, livenessMs: 1 },
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
      if (id.startsWith('team-a/')) expect(slotOf(keys.lock)).toBe(slotOf(space.slots('team-a')));
    }
  });
});

