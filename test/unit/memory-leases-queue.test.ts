import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LeaseAcquire, LeaseAcquireOutcome } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';

/**
 * The embedded lease engine's queue and lock-delay at their edges, through its port (`store.leases`):
 * callers handed room at once hear in queue order; a caller behind the head that gives up hands
 * nothing on; a lock-delay shows from its lease's last instant; a lease without one leaves nothing
 * that holds its key once it is over, even when the clock later steps back.
 */
const GRACE_MS = 60_000;

let tokens = 0;
const ask = (kind: LeaseAcquire['kind'], id: string, more: Partial<LeaseAcquire> = {}): LeaseAcquire => ({
  kind,
  ids: [id],
  capacity: 1,
  weight: 1,
  ownerToken: `owner-${++tokens}`,
  ttlMs: 10_000,
  holder: null,
  ...more,
});

describe('embedded lease engine: queued callers, on the fake timers the store reads its clock from', () => {
  const START = Date.UTC(2030, 0, 1);
  let store: MemoryStore;

  beforeEach(() => {
    vi.useFakeTimers({ now: START, toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    store = new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 0, clock: () => Date.now() });
  });

  afterEach(async () => {
    await store.close();
    vi.useRealTimers();
  });

  it('readers let in together when a writer leaves hear in queue order, the head first', async () => {
    const rw = (more: Partial<LeaseAcquire>) => ask('rwlock', 'rw', { capacity: 100, ...more });
    const writer = rw({ weight: 100, ownerToken: 'writer' });
    expect((await store.leases.acquire(writer)).acquired).toBe(true);
    const heard: string[] = [];
    const answers = ['first', 'second', 'third'].map((holder) =>
      store.leases.acquire(rw({ holder, waitMs: 60_000 })).then((answer) => {
        heard.push(holder);
        return answer;
      }),
    );
    // All three queued; awaiting this read also lets each pending call attach to its answer before the release.
    expect((await store.leases.queue('rwlock', 'rw', 10)).map((caller) => caller.holder)).toEqual(['first', 'second', 'third']);
    expect(await store.leases.release('rwlock', ['rw'], 'writer')).toBe(true);
    const granted = await Promise.all(answers);
    // Someone acting on its grant (or logging it) must not see a caller behind it go first.
    expect(heard).toEqual(['first', 'second', 'third']);
    // Fencing tokens rise in queue order too.
    const given = granted.map((answer) => (answer.acquired ? (answer.fencingTokens[0] ?? 0) : 0));
    expect([...given].sort((a, b) => a - b)).toEqual(given);
    expect(granted.every((answer) => answer.acquired && answer.queued === true)).toBe(true);
  });

  it('a caller behind the head that gives up hands nothing on: the head still gets the key from the hand-over timer', async () => {
    expect((await store.leases.acquire(ask('lock', 'k'))).acquired).toBe(true);
    let head: LeaseAcquireOutcome | undefined;
    void store.leases.acquire(ask('lock', 'k', { waitMs: 60_000 })).then((answer) => (head = answer));
    const leaving = new AbortController();
    const behind = store.leases.acquire(ask('lock', 'k', { waitMs: 60_000, signal: leaving.signal })).catch((err: unknown) => err);
    // The lease's last millisecond: it is over, its hand-over timer fires 1 ms later.
    await vi.advanceTimersByTimeAsync(10_000);
    leaving.abort();
    await behind;
    expect(head).toBeUndefined();
    await vi.advanceTimersToNextTimerAsync();
    // The same grant as with nobody leaving: the moment a lease is handed on does not depend on
    // callers who were never next in line.
    expect(head).toMatchObject({ acquired: true, expiresAtMs: START + 10_001 + 10_000, queued: true });
  });
});

describe('embedded lease engine: lock-delay at the edges, on a clock the test moves', () => {
  const stores: MemoryStore[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  const open = (clock: FakeClock) => {
    const store = new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 0, clock: clock.now });
    stores.push(store);
    return store;
  };

  it("a watcher's read at the lease's expiry instant already shows the lock-delay and when it ends", async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const held = await store.leases.acquire(ask('lock', 'd', { ttlMs: 1_000, lockDelayMs: 5_000 }));
    if (!held.acquired) throw new Error('not granted');
    clock.set(held.expiresAtMs - 1);
    expect(await store.leases.inspectIndexed('lock', 'd')).toMatchObject({ state: { fencingToken: held.fencingTokens[0] } });
    expect(await store.leases.inspectIndexed('lock', 'd')).not.toHaveProperty('lockDelayUntilMs');
    // Nothing has read the key since: the lease is over at this instant, and the delay runs from it.
    clock.set(held.expiresAtMs);
    expect(await store.leases.inspectIndexed('lock', 'd')).toStrictEqual({
      state: null,
      lastFencingToken: held.fencingTokens[0],
      lockDelayUntilMs: held.expiresAtMs + 5_000,
    });
  });

  it('a lease without a lock-delay leaves nothing that holds its key once over, even when the clock steps back', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const first = await store.leases.acquire(ask('lock', 'k', { ttlMs: 1_000 }));
    if (!first.acquired) throw new Error('not granted');
    // Over: the next caller takes the key (the ended lease is dropped then) and lets it go.
    clock.set(first.expiresAtMs);
    const next = ask('lock', 'k', { ttlMs: 1_000 });
    expect((await store.leases.acquire(next)).acquired).toBe(true);
    expect(await store.leases.release('lock', ['k'], next.ownerToken)).toBe(true);
    // A clock correction back to within the first lease's time: that lease is gone, the key is free.
    clock.set(first.expiresAtMs - 500);
    const indexed = await store.leases.inspectIndexed('lock', 'k');
    expect(indexed.state).toBeNull();
    expect(indexed).not.toHaveProperty('lockDelayUntilMs');
    expect(await store.leases.acquire(ask('lock', 'k'))).toMatchObject({ acquired: true });
  });
});
