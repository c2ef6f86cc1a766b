import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { PermitKind } from '../../src/domain/permit-values.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The pool hash (KEYS[1]) can outlive the lease-ends ZSET (KEYS[4]): the ZSET is deleted when emptied and
 * made anew with a shorter TTL, while keepUntil never shortens the hash's. When the ZSET then expires with
 * an ended lease in it, that lease's `o:` field stays in the hash, unpruned. Its owner's late release must
 * be refused: trusted, it answered "released" and took its weight off the room of the live leases, and a
 * second permit of a limit of 1, or a reader beside a writer, was granted.
 */
const GRACE_MS = 1_000; // the smallest FENCE_GRACE_MS the config allows
const PREFIX = 'stale:';
let server: RedisServer;
let store: Worded<RedisStore>;

beforeAll(async () => {
  server = await RedisServer.start();
  store = withWords(new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 2_000, fenceGraceMs: GRACE_MS }));
  await eventually(() => store.ping(), 10_000);
});
afterAll(async () => {
  await store?.close();
  await server?.stop();
});

const take = (kind: PermitKind, id: string, weight: number, capacity: number, ttlMs: number) => {
  const ownerToken = newOwnerToken();
  return store.permits
    .acquirePermit({ kind, id, ownerToken, ttlMs, holder: null, weight, capacity, waitMs: 0 })
    .then((outcome) => ({ ...outcome, ownerToken }));
};

/** L1 (long TTL) granted and released at once; L2 (short TTL) left to expire; the key then idle past the grace. */
async function staleLeaseLeftInHash(kind: PermitKind, id: string, weight2: number, capacity: number): Promise<string> {
  const l1 = await take(kind, id, capacity === 1 ? 1 : 10_000, capacity, 10_000);
  expect(l1.acquired).toBe(true);
  expect(await store.permits.releasePermit(kind, id, l1.ownerToken)).toBe(true);
  const l2 = await take(kind, id, weight2, capacity, 100);
  expect(l2.acquired).toBe(true);
  // L2 ends at +100 ms; the lease-ends ZSET expires at +100 ms + grace; the pool hash only at L1's +10 s + grace.
  const keys = new KeySpace(PREFIX).permitKeys(kind, id);
  const raw = server.client();
  try {
    await vi.waitFor(async () => expect(await raw.exists(keys.expiries)).toBe(0), { timeout: 10_000, interval: 50 });
    expect(await raw.hexists(keys.pool, `o:${l2.ownerToken}`)).toBe(1); // the ended lease's record is still there
  } finally {
    raw.disconnect();
  }
  return l2.ownerToken;
}

describe('a lease that ended, left in the pool hash after its lease-ends ZSET expired', () => {
  it('semaphore of limit 1: its late release is refused and lets no second permit in', async () => {
    const id = 'ns/sem-stale';
    const staleOwner = await staleLeaseLeftInHash('semaphore', id, 1, 1);
    const l3 = await take('semaphore', id, 1, 1, 10_000);
    expect(l3.acquired).toBe(true);
    // The expired lease's owner releases late: must be not-owner (false), and must not free room.
    const lateRelease = await store.permits.releasePermit('semaphore', id, staleOwner);
    const l4 = await take('semaphore', id, 1, 1, 10_000);
    const state = await store.permits.inspectPermits('semaphore', id);
    expect({ lateRelease, l4Acquired: l4.acquired, held: state?.holderCount, limit: state?.capacity }).toEqual({
      lateRelease: false,
      l4Acquired: false,
      held: 1,
      limit: 1,
    });
  });

  it('read/write lock: a late release of an expired read lease is refused and lets no reader in beside a writer', async () => {
    const id = 'ns/rw-stale';
    const staleReader = await staleLeaseLeftInHash('rwlock', id, 1, 10_000);
    const writer = await take('rwlock', id, 10_000, 10_000, 10_000);
    expect(writer.acquired).toBe(true);
    const lateRelease = await store.permits.releasePermit('rwlock', id, staleReader);
    const reader = await take('rwlock', id, 1, 10_000, 10_000);
    const state = await store.permits.inspectPermits('rwlock', id);
    const weights = state?.holders.map((h) => h.weight).sort((a, b) => a - b);
    expect({ lateRelease, readerAcquired: reader.acquired, weights }).toEqual({
      lateRelease: false,
      readerAcquired: false,
      weights: [10_000],
    });
  });
});
