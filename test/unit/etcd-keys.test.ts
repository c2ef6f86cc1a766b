import { describe, expect, it } from 'vitest';
import { EtcdKeys, prefixEnd } from '../../src/store/etcd/etcd-keys.js';

const keys = new EtcdKeys('kh/');
const text = (b: Buffer) => b.toString('utf8');

/** Whether etcd's range [key, rangeEnd) holds `candidate` (byte order; an end of "\0" means no upper bound). */
function inRange(range: { key: Buffer; rangeEnd: Buffer }, candidate: Buffer): boolean {
  if (Buffer.compare(candidate, range.key) < 0) return false;
  if (range.rangeEnd.length === 1 && range.rangeEnd[0] === 0) return true;
  return Buffer.compare(candidate, range.rangeEnd) < 0;
}

describe('etcd prefix ranges', () => {
  it('ends a prefix range just past its last byte that can go up', () => {
    expect(prefixEnd(Buffer.from('abc'))).toEqual(Buffer.from('abd'));
    expect(prefixEnd(Buffer.from([0x61, 0xff]))).toEqual(Buffer.from([0x62]));
    expect(prefixEnd(Buffer.from([0x61, 0x62, 0xff, 0xff]))).toEqual(Buffer.from([0x61, 0x63]));
    expect(prefixEnd(Buffer.from([0xfe, 0xff]))).toEqual(Buffer.from([0xff]));
  });

  it('reads every key from the start when no byte can go up (an empty or all-0xff prefix)', () => {
    expect(prefixEnd(Buffer.alloc(0))).toEqual(Buffer.from([0]));
    expect(prefixEnd(Buffer.from([0xff]))).toEqual(Buffer.from([0]));
    expect(prefixEnd(Buffer.from([0xff, 0xff]))).toEqual(Buffer.from([0]));
    expect(new EtcdKeys('').all()).toEqual({ key: Buffer.alloc(0), rangeEnd: Buffer.from([0]) });
  });

  it('leaves the prefix given untouched', () => {
    const prefix = Buffer.from('ab');
    prefixEnd(prefix);
    expect(text(prefix)).toBe('ab');
  });

  it("holds exactly one lock's waiters in its queue range, never a lock whose id extends it", () => {
    const queue = keys.queue('ns/a');
    expect(inRange(queue, keys.waiter('ns/a', 'w1'))).toBe(true);
    expect(inRange(queue, keys.waiter('ns/ab', 'w1'))).toBe(false);
    expect(inRange(queue, keys.waiter('ns/a.b', 'w1'))).toBe(false);
    const permits = keys.permitQueue('semaphore', 'ns/a');
    expect(inRange(permits, keys.permitWaiter('semaphore', 'ns/a', 'w2'))).toBe(true);
    expect(inRange(permits, keys.permitWaiter('rwlock', 'ns/a', 'w2'))).toBe(false);
  });
});

describe('etcd key names', () => {
  it("reads a waiter's id back from its key", () => {
    expect(keys.waiterIdOf(keys.waiter('ns/a', 'abc123'))).toBe('abc123');
    expect(keys.waiterIdOf(keys.permitWaiter('rwlock', 'ns/a:b', 'w-9'))).toBe('w-9');
    expect(keys.waiterIdOf(keys.leaseWaiter('lock', 'ns/x', 'q'))).toBe('q');
  });

  it("reads a lease record's id back from its key, and nothing from another kind's key", () => {
    expect(keys.lockIdOf(keys.lock('ns/a'))).toBe('ns/a');
    expect(keys.lockIdOf(keys.pool('semaphore', 'ns/a'))).toBeNull();
    expect(keys.poolIdOf('semaphore', keys.pool('semaphore', 'ns/a'))).toBe('ns/a');
    expect(keys.poolIdOf('rwlock', keys.pool('semaphore', 'ns/a'))).toBeNull();
    expect(keys.leaseIdOf('lock', keys.leaseRecord('lock', 'ns/a'))).toBe('ns/a');
    expect(keys.leaseIdOf('rwlock', keys.leaseRecord('rwlock', 'ns/b'))).toBe('ns/b');
  });

  it('keeps the names a lock had before locks were pools, and every other kind under pool/<kind>/', () => {
    expect(text(keys.leaseRecord('lock', 'ns/a'))).toBe('kh/lock/ns/a');
    expect(text(keys.leaseRecord('semaphore', 'ns/a'))).toBe('kh/pool/semaphore/ns/a');
    expect(text(keys.leaseWaiter('lock', 'ns/a', 'w'))).toBe('kh/queue/ns/a#w');
    expect(text(keys.leaseWaiter('rwlock', 'ns/a', 'w'))).toBe('kh/pqueue/rwlock/ns/a#w');
    expect(text(keys.leaseQueue('lock', 'ns/a').key)).toBe('kh/queue/ns/a#');
    expect(text(keys.leaseQueue('semaphore', 'ns/a').key)).toBe('kh/pqueue/semaphore/ns/a#');
    expect(text(keys.leaseRecords('lock', 'ns/').key)).toBe('kh/lock/ns/');
    expect(text(keys.leaseRecords('rwlock', 'ns/').key)).toBe('kh/pool/rwlock/ns/');
  });

  it('keeps retired quota slots outside the range a reservation counts', () => {
    const slots = keys.quotaSlots('ns');
    expect(inRange(slots, keys.quotaSlot('ns', 's1'))).toBe(true);
    expect(inRange(slots, keys.retiredQuotaSlot('ns', 's1'))).toBe(false);
    expect(inRange(slots, keys.quotaSlotVersion('ns'))).toBe(false);
  });

  it('puts every key it writes under the prefix', () => {
    const all = keys.all();
    for (const key of [
      keys.lock('ns/a'),
      keys.waiter('ns/a', 'w'),
      keys.pool('semaphore', 'ns/a'),
      keys.quotaSlotVersion('ns'),
      keys.ping(),
    ])
      expect(inRange(all, key)).toBe(true);
    expect(inRange(all, Buffer.from('kh0'))).toBe(false);
  });
});
