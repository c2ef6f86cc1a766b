import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import type { LeaseAcquire, LeaseKind } from '../../src/domain/lease-store.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';

/**
 * The Redis lease engine (redis-leases.ts) at the edges the contract does not reach, spoken through the
 * store's port (`store.leases`): what a waited acquire that runs out names, a lease handed to a waiter
 * whose lock-delay cannot be set, the listing's order, a renewal's release request, a hand-over found by
 * the heartbeat when its message is lost, an extended quota slot, every kind of grant given back when
 * replica acknowledgement fails (a single Redis without replicas confirms no grant), and a connection
 * kept when the probe after a timed-out call gets its own echo.
 */

let server: RedisServer;
const stores: RedisStore[] = [];
const PREFIX = 'edges:';
let n = 0;
const uniqueKey = () => `e${Date.now().toString(36)}x${++n}`;

beforeAll(async () => {
  server = await RedisServer.startShared();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(stores.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await server.stop();
});

async function open(): Promise<RedisStore> {
  const store = await openRedisStore(server, { keyPrefix: PREFIX });
  stores.push(store);
  return store;
}

/** A store that asks one replica to confirm every grant: this Redis has none, so none is confirmed. */
async function openUnconfirmed(): Promise<RedisStore> {
  const store = new RedisStore({
    url: server.url,
    keyPrefix: PREFIX,
    commandTimeoutMs: 1_000,
    fenceGraceMs: 60_000,
    replicaAcks: { minReplicas: 1, timeoutMs: 20 },
  });
  stores.push(store);
  await eventually(() => store.ping(), 10_000);
  return store;
}

type Options = Partial<Omit<LeaseAcquire, 'kind' | 'keys'>>;

function lock(store: RedisStore, key: string | string[], options: Options = {}) {
  const ownerToken = options.ownerToken ?? newOwnerToken();
  const keys = typeof key === 'string' ? [key] : key;
  const outcome = store.leases.acquire({
    kind: 'lock',
    ids: keys,
    capacity: 1,
    weight: 1,
    ownerToken,
    ttlMs: 10_000,
    holder: null,
    ...options,
  });
  return { ownerToken, outcome };
}

function permit(store: RedisStore, key: string, capacity: number, options: Options = {}) {
  const ownerToken = options.ownerToken ?? newOwnerToken();
  const outcome = store.leases.acquire({
    kind: 'semaphore',
    ids: [key],
    capacity,
    weight: 1,
    ownerToken,
    ttlMs: 10_000,
    holder: null,
    ...options,
  });
  return { ownerToken, outcome };
}

async function held(kind: LeaseKind, store: RedisStore, key: string): Promise<boolean> {
  return (await store.leases.inspect(kind, key)) !== null;
}

/** Resolves once `key` has a caller queued in Redis (the waiter's acquire script answered "queued"). */
async function queuedOn(kind: LeaseKind, store: RedisStore, key: string): Promise<void> {
  await vi.waitFor(async () => expect((await store.leases.queue(kind, key, 10)).length).toBeGreaterThan(0), {
    timeout: 5_000,
    interval: 10,
  });
}

describe('redis lease engine: a waited acquire that runs out', () => {
  it('names the busy key, for a lock and for a semaphore', async () => {
    const store = await open();
    const key = uniqueKey();
    expect(await lock(store, key).outcome).toMatchObject({ acquired: true });
    expect(await lock(store, key, { waitMs: 50 }).outcome).toMatchObject({ acquired: false, reason: 'full', busyId: key });

    const pool = uniqueKey();
    expect(await permit(store, pool, 1).outcome).toMatchObject({ acquired: true });
    expect(await permit(store, pool, 1, { waitMs: 50 }).outcome).toMatchObject({ acquired: false, reason: 'full', busyId: pool });
  });
});

describe('redis lease engine: a lock handed over to a waiter with a lock-delay', () => {
  /** Redis answers the lock-delay step as if the handed lease had ended before it ran. */
  function leaseEndsBeforeItsDelay(store: RedisStore) {
    const scripts = (store as unknown as { scripts: { run: (name: string, ...rest: unknown[]) => Promise<unknown> } }).scripts;
    const run = scripts.run.bind(scripts);
    return vi.spyOn(scripts, 'run').mockImplementation((name, ...rest) => (name === 'lockDelay' ? Promise.resolve(0) : run(name, ...rest)));
  }

  it('is refused and the lease given back when the delay cannot be set; a waiter without a delay never needs that step', async () => {
    const store = await open();
    const runs = leaseEndsBeforeItsDelay(store);

    const key = uniqueKey();
    const holder = lock(store, key);
    await holder.outcome;
    const waiter = lock(store, key, { waitMs: 5_000, lockDelayMs: 5_000 });
    await queuedOn('lock', store, key);
    expect(await store.leases.release('lock', [key], holder.ownerToken)).toBe(true);
    await expect(waiter.outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    // Given back: nobody holds it, and no lock-delay keeps the next caller out.
    expect(await held('lock', store, key)).toBe(false);
    expect(await lock(store, key).outcome).toMatchObject({ acquired: true });

    const plain = uniqueKey();
    const first = lock(store, plain);
    await first.outcome;
    const second = lock(store, plain, { waitMs: 5_000 });
    await queuedOn('lock', store, plain);
    expect(await store.leases.release('lock', [plain], first.ownerToken)).toBe(true);
    expect(await second.outcome).toMatchObject({ acquired: true });
    expect(runs.mock.calls.filter(([name]) => name === 'lockDelay')).toHaveLength(1);
  });
});

describe('redis lease engine: listing', () => {
  it('lists a page of semaphores in key order', async () => {
    const store = await open();
    const prefix = uniqueKey();
    const names = Array.from({ length: 12 }, (_, i) => `${prefix}-${String.fromCharCode(108 - i)}${(i * 7) % 5}`);
    for (const name of names) expect(await permit(store, name, 2).outcome).toMatchObject({ acquired: true });
    const page = await store.leases.list('semaphore', { prefix, limit: 100 });
    expect(page.entries.map((e) => e.id)).toEqual([...names].sort());
  });
});

describe('redis lease engine: replica acknowledgement that never comes', () => {
  it('gives back a lock, a lock set and a semaphore lease it granted but could not confirm', async () => {
    const plain = await open();
    const store = await openUnconfirmed();

    const key = uniqueKey();
    await expect(lock(store, key).outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await held('lock', plain, key)).toBe(false);

    const set = [uniqueKey(), uniqueKey(), uniqueKey()].sort();
    await expect(lock(store, set).outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    for (const member of set) expect(await held('lock', plain, member)).toBe(false);

    const pool = uniqueKey();
    await expect(permit(store, pool, 3).outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await held('semaphore', plain, pool)).toBe(false);
  });

  it('gives back a lock and a semaphore lease handed to a waiter, and the key is free for the next caller', async () => {
    const plain = await open();
    const store = await openUnconfirmed();

    const key = uniqueKey();
    const holder = lock(plain, key);
    await holder.outcome;
    const waiter = lock(store, key, { waitMs: 5_000 });
    await queuedOn('lock', plain, key);
    expect(await plain.leases.release('lock', [key], holder.ownerToken)).toBe(true);
    await expect(waiter.outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await held('lock', plain, key)).toBe(false);

    const pool = uniqueKey();
    const first = permit(plain, pool, 1);
    await first.outcome;
    const second = permit(store, pool, 1, { waitMs: 5_000 });
    await queuedOn('semaphore', plain, pool);
    expect(await plain.leases.release('semaphore', [pool], first.ownerToken)).toBe(true);
    await expect(second.outcome).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await held('semaphore', plain, pool)).toBe(false);
  });
});

describe('redis lease engine: a renewal of one lock', () => {
  it('tells its holder of a release request', async () => {
    const store = await open();
    const key = uniqueKey();
    const holder = lock(store, key);
    const granted = await holder.outcome;
    if (!granted.acquired) throw new Error('not granted');
    const asked = await store.leases.requestRelease('lock', key, granted.fencingTokens[0] as number, { by: 'ops', reason: 'deploy' });
    expect(asked).toMatchObject({ by: 'ops', reason: 'deploy' });
    expect(await store.leases.renew('lock', [key], holder.ownerToken, 10_000)).toMatchObject({
      renewed: true,
      fencingTokens: granted.fencingTokens,
      releaseRequested: { by: 'ops', reason: 'deploy' },
    });
  });
});

describe('redis lease engine: a hand-over whose message never arrives', () => {
  it('is found by the heartbeat within a few seconds, long before the wait or the lease would end', async () => {
    const holderSide = await open();
    const store = await open();
    // The message to this instance goes missing: only its heartbeat (every second) can find the grant.
    vi.spyOn(store.engine, 'handedOver').mockImplementation(() => undefined);
    const key = uniqueKey();
    const holder = lock(holderSide, key, { ttlMs: 30_000 });
    await holder.outcome;
    const waiter = lock(store, key, { waitMs: 20_000 });
    await queuedOn('lock', holderSide, key);
    expect(await holderSide.leases.release('lock', [key], holder.ownerToken)).toBe(true);
    const started = performance.now();
    expect(await waiter.outcome).toMatchObject({ acquired: true });
    // A heartbeat comes every second; the wait itself would have ended after 20 s.
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe('redis lease engine: quota slots', () => {
  it('an extended slot keeps counting after the end it was reserved with', async () => {
    const store = await open();
    const namespace = uniqueKey();
    const reservedAt = Date.now();
    expect(await store.leases.reserveQuotaSlot(namespace, 'a', 200, 1)).toEqual({ reserved: true });
    await store.leases.extendQuotaSlot(namespace, 'a', Date.now() + 10_000, 1);
    // Past the end it was reserved with, as the store counts it (by the whole second: _quota.lua); a bound
    // on time, not a wait for something to happen.
    const countedUntil = Math.ceil((reservedAt + 200) / 1000) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, countedUntil + 150 - Date.now())));
    expect(await store.leases.reserveQuotaSlot(namespace, 'b', 10_000, 1)).toMatchObject({ reserved: false });
  });
});

describe('redis store: a Redis that was only slow', () => {
  it('keeps its connection once the probe after a timed-out call gets its own echo back', async () => {
    const own = await RedisServer.start();
    const connected = vi.fn<() => void>();
    const log = {
      info: (_obj: object, msg: string) => {
        if (msg === 'connected to Redis') connected();
      },
      warn: () => undefined,
    };
    const store = new RedisStore({ url: own.url, keyPrefix: PREFIX, commandTimeoutMs: 200, fenceGraceMs: 60_000, log });
    try {
      await eventually(() => store.ping(), 10_000);
      expect(connected).toHaveBeenCalledTimes(1);
      own.pause();
      // Times out; the store then sends one echo PING behind it to learn whether the connection is in step.
      await expect(lock(store, uniqueKey()).outcome).rejects.toBeInstanceOf(StoreUnavailableError);
      own.resume();
      // Replies come in order: once this answers, the probe has had its echo.
      await eventually(() => store.ping(), 10_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(connected).toHaveBeenCalledTimes(1);
      expect(await lock(store, uniqueKey()).outcome).toMatchObject({ acquired: true });
    } finally {
      own.resume();
      await store.close();
      await own.stop();
    }
  });
});
