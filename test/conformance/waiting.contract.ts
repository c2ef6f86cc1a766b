import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { TooManyWaitersError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { AcquireOutcome, LockStore } from '../helpers/store-words.js';
import type { StoreHarness } from './lock-store.contract.js';
import { clockOf, sleep, useInstances } from './contract-kit.js';

const uniqueKey = (name: string) => `${name}:${randomUUID()}`;

type Result = AcquireOutcome & { ownerToken: string; answeredAt: number };
type Granted = Extract<Result, { acquired: true }>;

/** Fails the test unless `r` is a grant (instead of skipping what follows), and narrows its type. */
function granted(r: Result): Granted {
  expect(r.acquired, 'expected a grant').toBe(true);
  if (!r.acquired) throw new Error('not granted');
  return r;
}

/** Waiting for a held lock: fair, prompt, bounded, and leak-free. Part of the one store contract. */
export function describeWaitingContract(name: string, harness: StoreHarness): void {
  describe(`lock store contract, waiting: ${name}`, () => {
    const now = clockOf(harness);
    const store = useInstances(harness);

    const acquire = async (
      store: LockStore,
      key: string,
      options: { ttlMs?: number; waitMs?: number; signal?: AbortSignal } = {},
    ): Promise<Result> => {
      const ownerToken = newOwnerToken();
      const outcome = await store.acquire({
        id: key,
        ownerToken,
        ttlMs: options.ttlMs ?? 5_000,
        holder: null,
        waitMs: options.waitMs ?? 0,
        signal: options.signal,
      });
      return { ...outcome, ownerToken, answeredAt: performance.now() };
    };

    it('queue lists the live waiters head first with holder label and arrival time, never owner tokens', async () => {
      const key = uniqueKey('queue');
      const holder = granted(await acquire(store(0), key, { ttlMs: 30_000 }));
      const before = now();
      const waits: Array<Promise<AcquireOutcome>> = [];
      for (const [i, label] of ['first', 'second', ''].entries()) {
        waits.push(store(i % 2).acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: label, waitMs: 20_000 }));
        await vi.waitFor(async () => expect((await store(2).inspect(key))?.waiters).toBe(i + 1), { timeout: 10_000, interval: 10 });
      }
      const queued = await store(2).queue(key, 100);
      expect(queued.map(({ position, holder: h }) => [position, h])).toEqual([
        [1, 'first'],
        [2, 'second'],
        [3, null],
      ]);
      for (const q of queued) {
        expect(q.weight).toBeUndefined();
        // The store's clock and this one are the same machine's: allow a little slack.
        expect(q.waitingSinceMs).toBeGreaterThanOrEqual(before - 1_000);
        expect(q.waitingSinceMs).toBeLessThanOrEqual(now() + 1_000);
      }
      expect(queued[0]!.waitingSinceMs).toBeLessThanOrEqual(queued[1]!.waitingSinceMs);
      expect(JSON.stringify(queued)).not.toContain(holder.ownerToken);
      expect(await store(0).queue(key, 2)).toHaveLength(2);
      expect(await store(0).queue(uniqueKey('queue-none'), 100)).toEqual([]);
      // The head is granted: it leaves the queue, the others move up.
      expect(await store(0).release(key, holder.ownerToken)).toBe(true);
      const head = await waits[0]!;
      expect(head.acquired).toBe(true);
      expect((await store(1).queue(key, 100)).map((q) => [q.position, q.holder])).toEqual([
        [1, 'second'],
        [2, null],
      ]);
      // Each one in turn: the lock goes down the queue, and nothing is left waiting.
      for (const next of waits.slice(1)) {
        await store(0).forceRelease(key);
        expect((await next).acquired).toBe(true);
      }
      await store(0).forceRelease(key);
      expect(await store(0).queue(key, 100)).toEqual([]);
    });

    it('a waiter is granted the lock when it is released, within milliseconds', async () => {
      const key = uniqueKey('release');
      const holder = granted(await acquire(store(0), key));
      const waiting = acquire(store(1), key, { waitMs: 5_000 });
      await sleep(100);
      const releasedAt = performance.now();
      expect(await store(0).release(key, holder.ownerToken)).toBe(true);
      const waiter = granted(await waiting);
      expect(waiter.fencingToken).toBeGreaterThan(holder.fencingToken);
      expect(waiter.answeredAt - releasedAt).toBeLessThan(1_000);
      expect((await store(2).inspect(key))?.fencingToken).toBe(waiter.fencingToken);
    });

    it('a waiter is granted the lock when the holder’s lease expires', async () => {
      const key = uniqueKey('expiry');
      const holder = granted(await acquire(store(0), key, { ttlMs: 300 }));
      const waiter = granted(await acquire(store(1), key, { waitMs: 5_000 }));
      expect(waiter.fencingToken).toBeGreaterThan(holder.fencingToken);
      // The old holder can no longer touch it.
      expect(await store(0).release(key, holder.ownerToken)).toBe(false);
    });

    it('a wait that runs out answers "not acquired" and leaves the queue', async () => {
      const key = uniqueKey('timeout');
      await acquire(store(0), key, { ttlMs: 5_000 });
      const started = performance.now();
      const waiter = await acquire(store(1), key, { waitMs: 300 });
      expect(waiter.acquired).toBe(false);
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
      expect((await store(2).inspect(key))?.waiters).toBe(0);
    });

    it('a wait that runs out says how long the holder’s lease has left now, not when the wait began', async () => {
      const key = uniqueKey('timeout-retry');
      const holder = await acquire(store(0), key, { ttlMs: 3_000 });
      if (!holder.acquired) throw new Error('not granted');
      const started = now();
      const waiter = await acquire(store(1), key, { waitMs: 400 });
      const answered = now();
      expect(waiter.acquired).toBe(false);
      if (waiter.acquired) return;
      // Between the lease's end as seen when the wait ended and when the answer arrived (plus clock slack).
      expect(waiter.retryAfterMs).toBeLessThanOrEqual(holder.expiresAtMs - (started + 400) + 50);
      expect(waiter.retryAfterMs).toBeGreaterThanOrEqual(holder.expiresAtMs - answered - 50);
      await store(0).release(key, holder.ownerToken);
    });

    it('inspect counts the callers waiting now: queued ones, minus those that left or gave up', async () => {
      const key = uniqueKey('waiters');
      const holder = await acquire(store(0), key, { ttlMs: 10_000 });
      const waiters = async () => (await store(2).inspect(key))?.waiters;
      expect(await waiters()).toBe(0);
      const leaving = new AbortController();
      const left = acquire(store(1), key, { waitMs: 10_000, signal: leaving.signal }).catch((err: unknown) => err);
      const short = acquire(store(0), key, { waitMs: 300 });
      const staying = acquire(store(2), key, { waitMs: 10_000 });
      await vi.waitFor(async () => expect(await waiters()).toBe(3), { timeout: 5_000, interval: 10 });
      leaving.abort(new Error('caller left'));
      await left;
      await vi.waitFor(async () => expect(await waiters()).toBe(2), { timeout: 5_000, interval: 10 });
      expect((await short).acquired).toBe(false);
      expect(await waiters()).toBe(1);
      await store(0).release(key, holder.ownerToken);
      const next = await staying;
      expect(next.acquired).toBe(true);
      expect(await waiters()).toBe(0);
      await store(2).release(key, next.ownerToken);
    });

    it('waiters are granted in arrival order (FIFO), across instances', async () => {
      const key = uniqueKey('fifo');
      const first = await acquire(store(0), key, { ttlMs: 5_000 });
      const order: number[] = [];
      const waiters: Array<Promise<Result>> = [];
      for (let i = 0; i < 4; i++) {
        waiters.push(
          acquire(store(i), key, { waitMs: 10_000 }).then((r) => {
            order.push(i);
            return r;
          }),
        );
        // The next one asks only once this one is queued, so the arrival order is the loop's order
        // however slow the machine (a fixed pause was not always enough under load).
        await vi.waitFor(async () => expect((await store(0).inspect(key))?.waiters).toBe(i + 1), { timeout: 5_000, interval: 10 });
      }
      let current = first;
      for (let i = 0; i < 4; i++) {
        expect(await store(i).release(key, current.ownerToken)).toBe(true);
        current = await (waiters[i] as Promise<Result>);
        expect(current.acquired).toBe(true);
      }
      expect(order).toEqual([0, 1, 2, 3]);
    });

    it('a caller that does not wait does not jump a queue', async () => {
      const key = uniqueKey('nojump');
      const holder = await acquire(store(0), key, { ttlMs: 5_000 });
      const waiting = acquire(store(1), key, { waitMs: 5_000 });
      await sleep(50);
      await store(0).release(key, holder.ownerToken);
      const newcomer = await acquire(store(2), key);
      expect(newcomer.acquired).toBe(false);
      expect((await waiting).acquired).toBe(true);
    });

    it('a waiter whose caller leaves is taken out of the queue; the next waiter gets the lock', async () => {
      const key = uniqueKey('abort');
      const holder = await acquire(store(0), key, { ttlMs: 5_000 });
      const controller = new AbortController();
      const leaving = acquire(store(1), key, { waitMs: 5_000, signal: controller.signal });
      await sleep(30);
      const staying = acquire(store(2), key, { waitMs: 5_000 });
      await sleep(30);
      controller.abort(new Error('caller left'));
      await expect(leaving).rejects.toThrow('caller left');
      await store(0).release(key, holder.ownerToken);
      const next = await staying;
      expect(next.acquired).toBe(true);
    });

    it('a caller that left before its acquire ran takes nothing, not even a free lock', async () => {
      const key = uniqueKey('gone');
      const gone = AbortSignal.abort(new Error('caller left'));
      await expect(acquire(store(0), key, { waitMs: 1_000, signal: gone })).rejects.toThrow('caller left');
      expect(await store(1).inspect(key)).toBeNull();
      const holder = await acquire(store(1), key);
      expect(holder.acquired).toBe(true);
      await expect(acquire(store(2), key, { waitMs: 1_000, signal: gone })).rejects.toThrow('caller left');
      expect((await store(0).inspect(key))?.waiters).toBe(0);
      await store(1).release(key, holder.ownerToken);
    });

    it('a full queue refuses more waiters with TooManyWaitersError', async () => {
      const key = uniqueKey('cap');
      const holder = await acquire(store(0), key, { ttlMs: 5_000 });
      const queued = Array.from({ length: 5 }, (_, i) => acquire(store(i), key, { waitMs: 2_000 }));
      await sleep(100);
      await expect(acquire(store(1), key, { waitMs: 2_000 })).rejects.toBeInstanceOf(TooManyWaitersError);
      // Clean up: release and let each queued waiter take and give back the lock.
      await store(0).release(key, holder.ownerToken);
      for (const [i, waiting] of queued.entries()) {
        const r = await waiting;
        if (r.acquired) await store(i).release(key, r.ownerToken);
      }
    });

    it('fencing tokens strictly increase across hand-overs', async () => {
      const key = uniqueKey('tokens');
      const holder = await acquire(store(0), key, { ttlMs: 5_000 });
      const waiters: Array<Promise<Result>> = [];
      for (let i = 0; i < 4; i++) {
        waiters.push(acquire(store(i), key, { waitMs: 10_000 }));
        await sleep(20);
      }
      const tokens: number[] = [granted(holder).fencingToken];
      let current = holder;
      for (const [i, waiting] of waiters.entries()) {
        expect(await store(i).release(key, current.ownerToken)).toBe(true);
        current = granted(await waiting);
        tokens.push(current.fencingToken);
      }
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as number);
    });
  });
}
