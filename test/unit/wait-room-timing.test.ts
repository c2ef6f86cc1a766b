import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CancelReply } from '../../src/store/shared/lease-replies.js';
import { WaitRoom, type HandedLease, type Waiter, type WaitRoomOps } from '../../src/store/shared/wait-room.js';

/**
 * The wait room's own bookkeeping, on fake timers and a fake store: which callers a visit names, when a
 * key is visited, what a hand-over message's lease is passed on with, and that an idle room keeps no
 * timers and forgets its finished callers (a long-running instance must not grow with every wait).
 * The behaviour against a real Redis is in test/redis/wait-room.test.ts.
 */

type Outcome = { readonly acquired: boolean; readonly handed?: HandedLease };

/** 60 s, the room's memory of a finished waiter (RETIRED_WAITER_MEMORY_MS in wait-room.ts). */
const RETIRED_MS = 60_000;

function fakeOps() {
  return {
    confirm: vi.fn(async (_waiter: Waiter, handed?: HandedLease): Promise<Outcome> => ({ acquired: true, handed })),
    notGranted: vi.fn((_retryAfterMs: number): Outcome => ({ acquired: false })),
    cancel: vi.fn(async (_waiter: Waiter): Promise<CancelReply> => ({ held: false, retryAfterMs: 10 })),
    release: vi.fn(async () => true),
    visit: vi.fn(async (_key: string, _waiters: readonly Waiter[]) => ({ remainingLeaseMs: 0, grantedWaiterIds: [] as string[] })),
  } satisfies WaitRoomOps<Outcome>;
}

let n = 0;
const waiterOn = (key: string): Waiter => ({ id: `w${++n}`, key, ownerToken: `t${n}`, ttlMs: 10_000 });

/** How many callers the room still remembers (finished ones included, until it forgets them). */
const remembered = (room: WaitRoom<Outcome>) => (room as unknown as { waiters: Map<string, unknown> }).waiters.size;

describe('wait room bookkeeping', () => {
  let ops: ReturnType<typeof fakeOps>;
  let room: WaitRoom<Outcome>;

  beforeEach(() => {
    vi.useFakeTimers();
    ops = fakeOps();
    room = new WaitRoom<Outcome>(ops);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A caller whose acquire script answered "queued", waiting `waitMs` with `retryAfterMs` left on the lease. */
  async function queuedCaller(key: string, waitMs = 30_000, retryAfterMs = 5_000) {
    const waiter = room.register(waiterOn(key));
    await waiter.enter(undefined, async () => 'queued');
    const outcome = waiter.wait(waitMs, retryAfterMs);
    return { waiter, outcome };
  }

  it('forgets a finished caller after one to two memory periods, and keeps no timer once idle', async () => {
    const first = await queuedCaller('a');
    room.granted(first.waiter.id);
    expect(await first.outcome).toMatchObject({ acquired: true });
    const second = await queuedCaller('b');
    room.granted(second.waiter.id);
    expect(await second.outcome).toMatchObject({ acquired: true });
    expect(remembered(room)).toBe(2);
    // One timer for every finished caller, however many (the key visits ended with their callers).
    expect(vi.getTimerCount()).toBe(1);

    await vi.advanceTimersByTimeAsync(RETIRED_MS);
    expect(remembered(room)).toBe(2);
    await vi.advanceTimersByTimeAsync(RETIRED_MS);
    expect(remembered(room)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);

    // Idle, then busy again: the memory timer comes back for the next finished caller.
    const third = await queuedCaller('c');
    room.granted(third.waiter.id);
    await third.outcome;
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(2 * RETIRED_MS);
    expect(remembered(room)).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a visit names only the callers queued in the store, and a key with none queued is not visited', async () => {
    // Registered, its acquire script not answered yet: nothing of it is in the store's queue to refresh.
    const pending = room.register(waiterOn('k'));
    room.visitAll();
    await vi.advanceTimersByTimeAsync(0);
    expect(ops.visit).not.toHaveBeenCalled();

    const queued = await queuedCaller('k');
    room.visitAll();
    await vi.advanceTimersByTimeAsync(0);
    expect(ops.visit).toHaveBeenCalledTimes(1);
    expect(ops.visit.mock.calls[0]?.[1].map((w) => w.id)).toEqual([queued.waiter.id]);
    pending.drop();
    room.granted(queued.waiter.id);
    await queued.outcome;
  });

  it('visits a key just after its lease is due to end, not before', async () => {
    const { waiter, outcome } = await queuedCaller('k', 30_000, 100);
    await vi.advanceTimersByTimeAsync(100);
    expect(ops.visit).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(2);
    expect(ops.visit).toHaveBeenCalledTimes(1);
    room.granted(waiter.id);
    await outcome;
  });

  it('passes on the lease a hand-over message named, whether it came before or after the script’s answer', async () => {
    const lease = { fencingToken: 7, expiresAtMs: 123_456 };
    // Before: the message overtook the acquire script's answer.
    const early = room.register(waiterOn('k'));
    room.granted(early.id, lease);
    await early.enter(undefined, async () => 'queued');
    expect(await early.wait(30_000, 5_000)).toMatchObject({ acquired: true, handed: { ...lease, registeredAt: early.registeredAt } });
    // After: the caller was already waiting.
    const late = await queuedCaller('k');
    room.granted(late.waiter.id, lease);
    expect(await late.outcome).toMatchObject({ acquired: true, handed: { ...lease, registeredAt: late.waiter.registeredAt } });
  });

  it('a caller that leaves takes its key’s visit timer with it', async () => {
    const { waiter, outcome } = await queuedCaller('k', 30_000, 10_000);
    // The key's visit (at the lease's end) and the caller's own wait.
    expect(vi.getTimerCount()).toBe(2);
    room.granted(waiter.id);
    await outcome;
    // Only the memory of finished callers is left.
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(ops.visit).not.toHaveBeenCalled();
  });
});
