import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaseAcquire, LeaseStore } from '../../src/domain/lease-store.js';
import { LockService } from '../../src/domain/lock-service.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { LIMITS, uniqueNamespace } from '../helpers/embedded-domain.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';

/**
 * Instance A's view of the store: its acquire answers come back `delayMs` late (A's event loop stalled,
 * or the reply sat in a slow socket) AFTER the store made the grant. The store itself is healthy and
 * instance B, on the same store, answers at once.
 */
function lateReplies(leases: LeaseStore, delayMs: number): { leases: LeaseStore } {
  return {
    leases: {
      ...leases,
      acquire: async (request: LeaseAcquire) => {
        const outcome = await leases.acquire(request);
        await sleep(delayMs);
        return outcome;
      },
    },
  };
}

// Long enough that the margins below (a few hundred ms at 1 s) hold on a busy machine.
const TTL = 4_000;

function scenarios(name: string, open: () => Promise<{ leases: LeaseStore }>) {
  describe(`${name}: a lease answered to an idempotent replay is never given back under the replay's holder`, () => {
    it('late grant on instance A, replay answered by instance B: nobody else may be granted while B says the lease is held', async () => {
      const store = await open();
      const a = new LockService(lateReplies(store.leases, TTL * 0.6), LIMITS); // slower than ttl/2: A's guard refuses it
      const b = new LockService(store, LIMITS);
      const ns = uniqueNamespace();
      const idempotency = { callerId: 'client-1', key: 'retry-42' };

      // The client's first try lands on A; A's answer is late. The client times out and retries on B.
      const first = a.acquire(ns, 'k', TTL, { idempotency }).then(
        (g) => ({ ok: true as const, g }),
        (e: unknown) => ({ ok: false as const, e }),
      );
      await sleep(50);
      const replay = await b.acquire(ns, 'k', TTL, { idempotency });
      const replayedAt = Date.now();
      expect(replay.expiresAtMs).toBeGreaterThan(replayedAt + 300);

      // A's late-grant guard gives the lease back (A answers 503) ...
      const settled = await first;
      expect(settled.ok).toBe(false);

      // ... while the client holds B's 200 answer: its lease runs until replay.expiresAtMs.
      expect(Date.now()).toBeLessThan(replay.expiresAtMs - 100);
      const other = await b.acquire(ns, 'k', TTL).then(
        (g) => g,
        () => null,
      );
      // Two callers told they hold the lock at once: the client (via the replay) and `other`.
      expect(other, 'another caller was granted the lock while the replayed lease was still held').toBeNull();
    });

    it('a waiting acquire whose caller left: its give-back takes the lease a replay was just answered with', async () => {
      const store = await open();
      const a = new LockService(lateReplies(store.leases, 150), LIMITS); // a store round trip, no lateness
      const b = new LockService(store, LIMITS);
      const ns = uniqueNamespace();
      const idempotency = { callerId: 'client-1', key: 'retry-43' };
      const gone = new AbortController();

      // First try (waitMs > 0: the route passes the connection's signal); the client times out and retries.
      const first = a.acquire(ns, 'k', 5_000, { idempotency, waitMs: 2_000, signal: gone.signal }).catch(() => null);
      await sleep(50);
      gone.abort(); // the client's first connection closed
      const replay = await b.acquire(ns, 'k', 5_000, { idempotency, waitMs: 2_000 });
      await first; // A sees its caller gone and gives "its" lease back

      expect(Date.now()).toBeLessThan(replay.expiresAtMs - 1_000);
      const other = await b.acquire(ns, 'k', 5_000).then(
        (g) => g,
        () => null,
      );
      expect(other, 'another caller was granted the lock while the replayed lease was still held').toBeNull();
    });
  });
}

describe('the check just before the answer is written (confirmFresh)', () => {
  it('keeps a late lease asked with an Idempotency-Key, and gives back one asked without', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const keyed = await locks.acquire(ns, 'keyed', 60_000, { idempotency: { callerId: 'c', key: 'k1' } });
    const plain = await locks.acquire(ns, 'plain', 60_000);
    expect([keyed.idempotent, plain.idempotent]).toEqual([true, false]);
    // Both answers as if held up for a minute before they could be written.
    for (const grant of [keyed, plain]) {
      await expect(locks.confirmFresh(ns, { ...grant, decidedAt: grant.decidedAt - 60_000 })).rejects.toThrow(/lease/);
    }
    expect((await locks.inspect(ns, 'keyed'))?.fencingToken).toBe(keyed.fencingToken);
    expect(await locks.inspect(ns, 'plain')).toBeNull();
    // The kept lease is the key's: a retry with it gets it back.
    const again = await locks.acquire(ns, 'keyed', 60_000, { idempotency: { callerId: 'c', key: 'k1' } });
    expect(again.ownerToken).toBe(keyed.ownerToken);
    await store.close();
  });
});

scenarios('embedded store', async () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }));

let server: RedisServer;
const stores: RedisStore[] = [];
beforeAll(async () => {
  server = await RedisServer.start();
}, 30_000);
afterAll(async () => {
  for (const s of stores) await s.close();
  await server?.stop();
});
scenarios('redis', async () => {
  const s = await openRedisStore(server);
  stores.push(s);
  return s;
});
