import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LeaseAcquireOutcome } from '../../src/domain/lease-store.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { HEARTBEAT_INTERVAL_MS, startHeartbeat, type WaitRoom, type WaitRoomOps } from '../../src/store/shared/wait-room.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { lockField, lockFields } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The Redis store's wait room at the moments the contract cannot place: a hand-over message that comes
 * before the acquire script's answer, or never; a lease that ends, or is renewed, while callers wait;
 * a store closed with callers queued. Each test drives a real RedisStore on a real Redis and reaches
 * into the store only to stop its heartbeat (so that each test sees only the visits it is about, not
 * one a second that would rescue a missed step within a second), to lose hand-over messages, or to
 * hand the room a notice itself.
 */

/** The parts of a RedisStore these tests drive directly. */
interface StoreInside {
  readonly heartbeat: NodeJS.Timeout;
  onHandOverMessage(message: string): void;
}
/** The parts of its lease engine (redis-leases.ts): the locks' wait room and what it calls. */
interface EngineInside {
  readonly room: WaitRoom<LeaseAcquireOutcome>;
  /** Every hand-over notice of a waiter of this instance: by message, or in the reply of its own release. */
  handedOver(notice: unknown): void;
  renewLockLease(key: string, ownerToken: string, ttlMs: number): Promise<unknown>;
}
const inside = (store: Worded<RedisStore>) => store as unknown as StoreInside;
const engine = (store: Worded<RedisStore>) => store.engine as unknown as EngineInside;
const opsOf = (room: WaitRoom<LeaseAcquireOutcome>) => (room as unknown as { ops: WaitRoomOps<LeaseAcquireOutcome> }).ops;

const PREFIX = 'room:';
const keySpace = new KeySpace(PREFIX);
let n = 0;
const uniqueKey = () => `k${++n}`;

/** Rejects if `promise` has not settled within `ms`: a missing answer fails the test at once, not at its time-out. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('redis wait room: the heartbeat', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('visits every HEARTBEAT_INTERVAL_MS and does not keep the process alive', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const visit = vi.fn();
    const timer = startHeartbeat(visit);
    try {
      expect(timer.hasRef()).toBe(false);
      vi.advanceTimersByTime(HEARTBEAT_INTERVAL_MS - 1);
      expect(visit).not.toHaveBeenCalled();
      vi.advanceTimersByTime(1);
      expect(visit).toHaveBeenCalledTimes(1);
      vi.advanceTimersByTime(HEARTBEAT_INTERVAL_MS);
      expect(visit).toHaveBeenCalledTimes(2);
    } finally {
      clearInterval(timer);
    }
  });
});

describe('redis wait room', () => {
  let server: RedisServer;
  let raw: Redis;
  let store: Worded<RedisStore>;
  let room: WaitRoom<LeaseAcquireOutcome>;
  let visits: MockInstance<WaitRoomOps<LeaseAcquireOutcome>['visit']>;
  let confirms: MockInstance<WaitRoomOps<LeaseAcquireOutcome>['confirm']>;
  let startWaiting: ReturnType<typeof spyOnWaits>;

  beforeAll(async () => {
    server = await RedisServer.start();
    raw = server.client();
  });
  afterAll(async () => {
    raw.disconnect();
    await server.stop();
  });

  /** Spies on the moment the room learns that a caller is queued (the acquire script answered). */
  function spyOnWaits(target: WaitRoom<LeaseAcquireOutcome>) {
    return vi.spyOn(target, 'startWaiting');
  }

  /** A store whose room is visited only by its lease-end timer (or by the test): no heartbeat. */
  async function openStore(commandTimeoutMs?: number): Promise<Worded<RedisStore>> {
    const opened = withWords(await openRedisStore(server, { keyPrefix: PREFIX, commandTimeoutMs }));
    clearInterval(inside(opened).heartbeat);
    return opened;
  }

  // Built per test, not in beforeAll: the room's constructor code then counts as reached by each test.
  beforeEach(async () => {
    store = await openStore();
    room = engine(store).room;
    visits = vi.spyOn(opsOf(room), 'visit');
    confirms = vi.spyOn(opsOf(room), 'confirm');
    startWaiting = spyOnWaits(room);
  });
  afterEach(async () => {
    await store.close();
    vi.restoreAllMocks();
  });

  /** The ids of the first `count` waiters the room was told are queued. */
  async function queued(count = 1, spy = startWaiting): Promise<string[]> {
    await vi.waitFor(() => expect(spy.mock.calls.length).toBeGreaterThanOrEqual(count), { timeout: 5_000, interval: 5 });
    return spy.mock.calls.map(([waiter]) => waiter.id);
  }

  async function hold(key: string, ttlMs: number, on = store): Promise<string> {
    const ownerToken = newOwnerToken();
    expect((await on.acquire({ id: key, ownerToken, ttlMs, holder: null })).acquired).toBe(true);
    return ownerToken;
  }

  function wait(key: string, waitMs: number, options: { signal?: AbortSignal; on?: Worded<RedisStore>; ttlMs?: number } = {}) {
    const ownerToken = newOwnerToken();
    const ttlMs = options.ttlMs ?? 10_000;
    const outcome = (options.on ?? store).acquire({ id: key, ownerToken, ttlMs, holder: null, waitMs, signal: options.signal });
    return { ownerToken, outcome };
  }

  /** Hand-over messages to this store go missing from now on (the heartbeat is what finds such grants). */
  function loseHandOverMessages(): void {
    vi.spyOn(engine(store), 'handedOver').mockImplementation(() => undefined);
  }

  it('a wait that runs out without a grant is refused with the time left on the lease', async () => {
    const key = uniqueKey();
    await hold(key, 5_000);
    const outcome = await wait(key, 50).outcome;
    expect(outcome).toMatchObject({ acquired: false });
    if (outcome.acquired) return;
    expect(outcome.retryAfterMs).toBeGreaterThan(3_000);
    expect(outcome.retryAfterMs).toBeLessThanOrEqual(5_000);
  });

  it('knows which keys its callers wait for, each of them, until the last one leaves', async () => {
    const key = uniqueKey();
    const holder = await hold(key, 10_000);
    expect(room.hasWaitersOn(key)).toBe(false);
    const first = wait(key, 5_000);
    const leaving = new AbortController();
    const second = wait(key, 5_000, { signal: leaving.signal });
    await queued(2);
    expect(room.hasWaitersOn(key)).toBe(true);
    expect(room.hasWaitersOn(uniqueKey())).toBe(false);

    // A visit names both of this instance's waiters (so both stay alive in Redis).
    room.visitAll();
    await vi.waitFor(() => expect(visits).toHaveBeenCalled());
    expect(visits.mock.calls[0]?.[1].map((w) => w.ownerToken).sort()).toEqual([first.ownerToken, second.ownerToken].sort());

    const reason = new Error('caller left');
    leaving.abort(reason);
    await expect(second.outcome).rejects.toBe(reason);
    expect(room.hasWaitersOn(key)).toBe(true);

    expect(await store.release(key, holder)).toBe(true);
    expect((await first.outcome).acquired).toBe(true);
    expect(room.hasWaitersOn(key)).toBe(false);
  });

  it('a caller who leaves while its acquire script runs is answered with its reason once the script answers', async () => {
    const key = uniqueKey();
    await hold(key, 10_000);
    const leaving = new AbortController();
    const waiter = wait(key, 5_000, { signal: leaving.signal });
    const reason = new Error('caller left');
    leaving.abort(reason);
    // Not at the end of its wait (5 s): the room sees the signal was aborted before it could listen.
    await expect(within(waiter.outcome, 1_000)).rejects.toBe(reason);
    await vi.waitFor(async () => expect(await raw.zcard(keySpace.lockKeys(key).queue)).toBe(0), { interval: 5 });
  });

  it('a hand-over message that comes before the acquire script’s answer is delivered at once', async () => {
    const key = uniqueKey();
    const holder = await hold(key, 10_000);
    const granted = vi.spyOn(room, 'granted');
    // Hold the script's answer back from the room until the hand-over message has reached it.
    const register = room.register.bind(room);
    vi.spyOn(room, 'register').mockImplementationOnce((waiter) => {
      const local = register(waiter);
      const wait = local.wait.bind(local);
      local.wait = async (...args) => {
        await vi.waitFor(() => expect(granted).toHaveBeenCalledWith(local.id, expect.anything()), { timeout: 5_000, interval: 5 });
        return wait(...args);
      };
      return local;
    });
    const waiter = wait(key, 5_000);
    await expect.poll(async () => (await store.inspect(key))?.waiters, { interval: 5 }).toBe(1);
    expect(await store.release(key, holder)).toBe(true);
    // Not at the end of the wait (5 s) or at the next visit (the lease's end, 10 s): now.
    expect(await within(waiter.outcome, 1_000)).toMatchObject({ acquired: true });
  });

  it('a waiter told of its hand-over soon is answered with the lease the message names, without a renewal', async () => {
    const key = uniqueKey();
    const renewals = vi.spyOn(engine(store), 'renewLockLease');
    const holder = await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    await queued();
    expect(await store.release(key, holder)).toBe(true);
    const outcome = await within(waiter.outcome, 1_000);
    // The lease Redis holds for the waiter, as the release script handed it over.
    const { o: owner, t: token, e: end } = await lockFields(raw, keySpace.lock(key));
    expect(owner).toBe(waiter.ownerToken);
    expect(outcome).toMatchObject({ acquired: true, fencingToken: Number(token), expiresAtMs: Number(end) });
    expect(renewals).not.toHaveBeenCalled();
  });

  it('a waiter told of its hand-over late next to its lease is confirmed with a renewal', async () => {
    const key = uniqueKey();
    const renewals = vi.spyOn(engine(store), 'renewLockLease');
    const lost = vi.spyOn(engine(store), 'handedOver').mockImplementation(() => undefined);
    const holder = await hold(key, 10_000);
    const ttlMs = 200;
    const waiter = wait(key, 5_000, { ttlMs });
    const [id] = await queued();
    expect(await store.release(key, holder)).toBe(true);
    const { t: token, e: end } = await lockFields(raw, keySpace.lock(key));
    // A quarter of the lease has passed since the waiter was registered (at least: a sleep is a lower bound).
    await sleep(ttlMs / 2);
    lost.mockRestore();
    inside(store).onHandOverMessage(`${id}|${token}|${end}|${key}`);
    const outcome = await within(waiter.outcome, 1_000);
    expect(renewals).toHaveBeenCalledTimes(1);
    // Renewed: a lease that ends later than the one handed over.
    expect(outcome).toMatchObject({ acquired: true, fencingToken: Number(token) });
    expect(outcome.acquired && outcome.expiresAtMs).toBeGreaterThan(Number(end));
  });

  it('a second notice of a grant already delivered changes nothing', async () => {
    const key = uniqueKey();
    const holder = await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    const [id] = await queued();
    await store.release(key, holder);
    expect((await waiter.outcome).acquired).toBe(true);
    expect(confirms).toHaveBeenCalledTimes(1);
    // The heartbeat's report of the same grant, after the message: no second confirmation.
    room.granted(id!);
    expect(confirms).toHaveBeenCalledTimes(1);
  });

  it('a hand-over notice whose lease is gone answers the caller with an error', async () => {
    const key = uniqueKey();
    await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    const [id] = await queued();
    const keys = keySpace.lockKeys(key);
    await raw.del(keys.lock, keys.queue, keys.waiters);
    room.granted(id!);
    await expect(within(waiter.outcome, 1_000)).rejects.toThrow(/took longer than the lease to deliver it/);
  });

  it('a wait that runs out just as the lock is handed over gets the lock', async () => {
    const key = uniqueKey();
    loseHandOverMessages();
    const holder = await hold(key, 10_000);
    const waiter = wait(key, 300);
    await queued();
    expect(await store.release(key, holder)).toBe(true);
    expect(await waiter.outcome).toMatchObject({ acquired: true });
    expect(await lockField(raw, keySpace.lock(key), 'o')).toBe(waiter.ownerToken);
  });

  it('a wait that runs out while Redis does not answer rejects instead of hanging', async () => {
    const key = uniqueKey();
    const slow = await openStore(200);
    try {
      const waits = spyOnWaits(engine(slow).room);
      await hold(key, 10_000, slow);
      const waiter = wait(key, 50, { on: slow });
      await queued(1, waits);
      server.pause();
      try {
        await expect(within(waiter.outcome, 3_000)).rejects.toMatchObject({ code: 'store_unavailable' });
      } finally {
        server.resume();
      }
    } finally {
      await slow.close();
    }
  });

  it('a lease that runs out is handed to the waiter at its end, in one visit', async () => {
    const key = uniqueKey();
    await hold(key, 150);
    const waiter = wait(key, 1_000);
    expect(await waiter.outcome).toMatchObject({ acquired: true });
    // One visit at the lease's end, not a poll until then.
    expect(visits.mock.calls.length).toBeLessThanOrEqual(2);
  });

  it('a lease renewed while callers wait is visited again at its new end', async () => {
    const key = uniqueKey();
    const holder = await hold(key, 200);
    const waiter = wait(key, 1_500);
    await queued();
    expect((await store.renew(key, holder, 300)).renewed).toBe(true);
    expect(await waiter.outcome).toMatchObject({ acquired: true });
  });

  it('a visit that finds the lock gone does not poll it', async () => {
    const key = uniqueKey();
    await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    // A waiter the store no longer queues, and that holds nothing, is told at once that its place is
    // gone, instead of waiting out its waitMs. (Awaited from here: the answer may come before the end.)
    const lost = expect(waiter.outcome).rejects.toThrow(/place in the queue was lost/);
    await queued();
    const keys = keySpace.lockKeys(key);
    await raw.del(keys.lock, keys.queue, keys.waiters);
    room.visitAll();
    await vi.waitFor(() => expect(visits.mock.settledResults[0]?.type).toBe('fulfilled'), { interval: 5 });
    await sleep(50);
    expect(visits).toHaveBeenCalledTimes(1);
    await lost;
    await store.close();
  });

  it('closing answers queued callers and gives back a lease handed to one that was not told yet', async () => {
    const key = uniqueKey();
    loseHandOverMessages();
    const holder = await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    await queued();
    expect(await store.release(key, holder)).toBe(true);
    expect(await lockField(raw, keySpace.lock(key), 'o')).toBe(waiter.ownerToken);
    const answer = expect(waiter.outcome).rejects.toThrow(/closing/);
    await store.close();
    await answer;
    store = await openStore();
    expect(await store.inspect(key)).toBeNull();
  });

  it('closing leaves alone a lease already delivered to a caller', async () => {
    const key = uniqueKey();
    const holder = await hold(key, 10_000);
    const waiter = wait(key, 5_000);
    await queued();
    await store.release(key, holder);
    const outcome = await waiter.outcome;
    expect(outcome.acquired).toBe(true);
    await store.close();
    store = await openStore();
    expect((await store.inspect(key))?.fencingToken).toBe(outcome.acquired ? outcome.fencingToken : -1);
  });

  it('a waiting caller granted at once is forgotten by the room: closing leaves its lease alone', async () => {
    const key = uniqueKey();
    const outcome = await wait(key, 5_000).outcome;
    expect(outcome.acquired).toBe(true);
    expect(room.hasWaitersOn(key)).toBe(false);
    await store.close();
    store = await openStore();
    expect((await store.inspect(key))?.fencingToken).toBe(outcome.acquired ? outcome.fencingToken : -1);
  });

  it('closing while a caller’s acquire script runs: it gets the closing error and leaves the queue', async () => {
    const key = uniqueKey();
    await hold(key, 10_000);
    const waiter = wait(key, 50);
    const answer = expect(waiter.outcome).rejects.toThrow(/closing/);
    await store.close();
    await answer;
    expect(await raw.zcard(keySpace.lockKeys(key).queue)).toBe(0);
  });
});
