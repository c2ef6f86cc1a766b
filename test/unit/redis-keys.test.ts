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

  it('every script touches keys of one Cluster slot: the lock id\'s namespace (and its quota slots)', () => {
    const slotOf = (key: string | number) => new Command('exists', [String(key)]).getSlot();
    for (const id of ['team-a/orders:1', 'team-a/x/y', 'plain']) {
      const keys = space.lockKeys(id);
      const hand = { graceMs: 1, channelPrefix: 'kh:grants:', lockName: id };
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
        rateLease: { windowKey: space.rateWindow('key:k'), windowMs: 1, max: 1, wanted: 1 },
      };
      for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
        const spec = SCRIPTS[name];
        const built = (spec.args as (a: unknown) => (string | number)[])(args[name]);
        const slots = new Set(built.slice(0, spec.numberOfKeys).map(slotOf));
        expect(slots.size, name).toBe(1);
      }
      if (id.startsWith('team-a/')) expect(slotOf(keys.lock)).toBe(slotOf(space.slots('team-a')));
    }
  });
});

