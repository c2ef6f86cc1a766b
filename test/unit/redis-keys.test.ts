import { describe, expect, it } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';

const space = new KeySpace('kh:');

describe('Redis key names', () => {
  it('tags every key of one namespace with the namespace, so they share a Cluster slot', () => {
    const keys = space.lockKeys('team-a/orders:1');
    expect(keys).toEqual({ lock: 'kh:{team-a}/orders:1', queue: 'kh:{team-a}q/orders:1', waiters: 'kh:{team-a}w/orders:1' });
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
});
