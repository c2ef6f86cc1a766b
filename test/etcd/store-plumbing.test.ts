import type { Etcd3, ITxnRequest, ITxnResponse } from 'etcd3';
import { describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError, TooManyWaitersError } from '../../src/domain/errors.js';
import { EtcdStore, type EtcdStoreOptions } from '../../src/store/etcd/etcd-store.js';
import type { EtcdCluster } from '../helpers/etcd-cluster.js';
import { ALIGNED_START_MS, etcdForFile, beforeEachTxn, rawKey } from '../helpers/etcd-store-fixtures.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { eventually } from '../helpers/redis-store.js';
import { freePort } from '../helpers/redis-server.js';
import { withWords } from '../helpers/store-words.js';

/**
 * The etcd store's plumbing (EtcdStore): which members a call may go to, its deadline, the instance's
 * session lease, the shared leases records hang on, and closing.
 */
let cluster: EtcdCluster;
let raw: Etcd3;
const opened: EtcdStore[] = [];
let prefixes = 0;

etcdForFile(opened, (shared, client) => {
  cluster = shared;
  raw = client;
});

function open(options: Partial<EtcdStoreOptions> = {}): EtcdStore {
  const store = new EtcdStore({
    endpoints: cluster.endpoints,
    keyPrefix: `plumbing-${++prefixes}/`,
    commandTimeoutMs: 5_000,
    fenceGraceMs: 60_000,
    ...options,
  });
  opened.push(store);
  return store;
}

/** The call's answer, or its error, or 'no answer' if it has none within `ms`. */
async function within(ms: number, call: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('no answer'), ms);
  });
  try {
    return await Promise.race([call.catch((err: unknown) => err), late]);
  } finally {
    clearTimeout(timer);
  }
}

const sessionOf = (store: EtcdStore) => (store as unknown as { sessionLease(): Promise<string> }).sessionLease();

describe('etcd store: members that cannot be reached', () => {
  it('a call that could not reach a member (connection refused) goes to another one', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const store = open({ endpoints: [dead, ...cluster.endpoints] });
    await eventually(() => store.ping(), 10_000);
    const failures: unknown[] = [];
    for (let i = 0; i < 30; i++) await store.ping().catch((err: unknown) => failures.push(err));
    expect(failures).toEqual([]);
  }, 30_000);

  it('with no member reachable, a ping fails closed (StoreUnavailableError) and promptly, not at the deadline', async () => {
    const store = open({ endpoints: [`http://127.0.0.1:${await freePort()}`], commandTimeoutMs: 20_000 });
    for (let i = 0; i < 3; i++) {
      const outcome = await within(8_000, store.ping());
      expect(outcome).toBeInstanceOf(StoreUnavailableError);
    }
  }, 60_000);

  it('a read through a member that went silent is a 503 within the command timeout, not a hang', async () => {
    const proxy = await FaultProxy.start(cluster.members[0]?.clientPort as number);
    try {
      const store = withWords(open({ endpoints: [proxy.url.replace(/^redis:/, 'http:')], commandTimeoutMs: 1_000 }));
      await eventually(() => store.ping(), 10_000);
      proxy.set({ kind: 'blackhole' });
      expect(await within(10_000, store.inspect('ns/silent'))).toBeInstanceOf(StoreUnavailableError);
      expect(await within(10_000, store.queue('ns/silent', 10))).toBeInstanceOf(StoreUnavailableError);
    } finally {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      await proxy.close();
    }
  }, 60_000);
});

describe('etcd store: a write whose answer was lost', () => {
  it('is a 503 (its outcome unknown), never sent again', async () => {
    const proxy = await FaultProxy.start(cluster.members[0]?.clientPort as number);
    try {
      const store = open({ endpoints: [proxy.url.replace(/^redis:/, 'http:')], commandTimeoutMs: 2_000 });
      await eventually(() => store.ping(), 10_000);
      // The reservation's write reaches etcd; the connection is reset as the answers come back.
      const hook = beforeEachTxn(store, (request) => {
        if (request.compare) proxy.set({ kind: 'resetOnReply' });
      });
      const outcome = await store.reserveQuotaSlot('ns', 'a', 10_000, 10).catch((err: unknown) => err);
      hook.restore();
      proxy.heal();
      expect(outcome).toBeInstanceOf(StoreUnavailableError);
      expect(hook.count()).toBe(2);
    } finally {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      await proxy.close();
    }
  }, 60_000);
});

describe('etcd store: closing', () => {
  it('after close every call is refused as "the store is closed", and closing again is harmless', async () => {
    const store = open();
    await eventually(() => store.ping(), 10_000);
    await store.close();
    const err = await store.ping().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toBe('the store is closed');
    await store.close();
    const again = await store.reserveQuotaSlot('ns', 'a', 1_000, 1).catch((e: unknown) => e);
    expect((again as Error).message).toBe('the store is closed');
  });

  it("close revokes the instance's session lease: its waiters' records go at once, not seconds later", async () => {
    const store = open();
    await eventually(() => store.ping(), 10_000);
    const session = await sessionOf(store);
    expect((await raw.leaseClient.leaseTimeToLive({ ID: session })).TTL).not.toBe('-1');
    await store.close();
    expect((await raw.leaseClient.leaseTimeToLive({ ID: session })).TTL).toBe('-1');
  });
});

describe("etcd store: the instance's session lease", () => {
  it('is one lease for every waiter of the instance, and each waiter record hangs on it', async () => {
    const inner = open();
    const prefix = `plumbing-${prefixes}/`;
    const store = withWords(inner);
    await eventually(() => store.ping(), 10_000);
    const session = await sessionOf(inner);
    expect(await sessionOf(inner)).toBe(session);
    const id = 'ns/queued';
    expect(await store.acquire({ id, ownerToken: 'h'.repeat(22), ttlMs: 30_000, holder: null })).toMatchObject({ acquired: true });
    const waiting = store.acquire({ id, ownerToken: 'w'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 20_000 });
    const kvs = await vi.waitFor(
      async () => {
        // Every waiter of the key: `<prefix>queue/<id>#<waiterId>` ('$' comes right after '#').
        const res = await raw.kv.range({ key: Buffer.from(`${prefix}queue/${id}#`), range_end: Buffer.from(`${prefix}queue/${id}$`) });
        expect(res.kvs).toHaveLength(1);
        return res.kvs;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(kvs[0]?.lease).toBe(session);
    expect(await store.release(id, 'h'.repeat(22))).toBe(true);
    expect(await waiting).toMatchObject({ acquired: true });
  });

  it('a lease that ended with no change in etcd (its holder gone) is handed to the waiter by the next heartbeat', async () => {
    const clock = new FakeClock(ALIGNED_START_MS);
    const inner = open({ clock: clock.now });
    const store = withWords(inner);
    await eventually(() => store.ping(), 10_000);
    const id = 'ns/ends';
    expect(await store.acquire({ id, ownerToken: 'h'.repeat(22), ttlMs: 15_000, holder: null })).toMatchObject({ acquired: true });
    const waiting = store.acquire({ id, ownerToken: 'w'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 60_000 });
    await vi.waitFor(async () => expect(await store.queue(id, 10)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    // The queued caller's first look at the key (right after its watch is in place) found 15 s left:
    // its next look is due then. The holder's lease ends now on the store's clock, which etcd never sees.
    await new Promise((resolve) => setTimeout(resolve, 500));
    clock.advance(15_000);
    expect(await within(5_000, waiting)).toMatchObject({ acquired: true });
  }, 30_000);

  it('refuses a waiter past maxWaitersPerKey', async () => {
    const store = withWords(open({ maxWaitersPerKey: 1 }));
    await eventually(() => store.ping(), 10_000);
    const id = 'ns/crowded';
    expect(await store.acquire({ id, ownerToken: 'h'.repeat(22), ttlMs: 30_000, holder: null })).toMatchObject({ acquired: true });
    const first = store.acquire({ id, ownerToken: 'a'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 20_000 });
    await vi.waitFor(async () => expect(await store.queue(id, 10)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    const second = await store
      .acquire({ id, ownerToken: 'b'.repeat(22), ttlMs: 30_000, holder: null, waitMs: 20_000 })
      .catch((err: unknown) => err);
    expect(second).toBeInstanceOf(TooManyWaitersError);
    expect(await store.release(id, 'h'.repeat(22))).toBe(true);
    expect(await first).toMatchObject({ acquired: true });
  });
});

describe('etcd store: the shared leases records hang on', () => {
  it('a record hangs on a lease that ends the slack (2 s) after its end, to the whole second, shared by the records ending in that second', async () => {
    const clock = new FakeClock(ALIGNED_START_MS);
    const store = open({ clock: clock.now });
    await eventually(() => store.ping(), 10_000);
    expect(await store.reserveQuotaSlot('ns', 'a', 5_000, 10)).toEqual({ reserved: true });
    expect(await store.reserveQuotaSlot('ns', 'b', 4_500, 10)).toEqual({ reserved: true });
    const prefix = `plumbing-${prefixes}/`;
    const a = await rawKey(raw, `${prefix}slot/ns#a`);
    const b = await rawKey(raw, `${prefix}slot/ns#b`);
    expect(a?.lease).not.toBe('0');
    expect(b?.lease).toBe(a?.lease);
    expect((await raw.leaseClient.leaseTimeToLive({ ID: a?.lease })).grantedTTL).toBe('7');
  });

  it("a bucket's lease is granted anew once it has ended, even while the store's clock stands still", async () => {
    // sharedWallClock stands still after the wall clock stepped back, until it catches up.
    const clock = new FakeClock(ALIGNED_START_MS);
    const store = open({ clock: clock.now });
    await eventually(() => store.ping(), 10_000);
    expect(await store.reserveQuotaSlot('ns', 'a', 1, 100)).toEqual({ reserved: true });
    const prefix = `plumbing-${prefixes}/`;
    const lease = (await rawKey(raw, `${prefix}slot/ns#a`))?.lease as string;
    await vi.waitFor(async () => expect((await raw.leaseClient.leaseTimeToLive({ ID: lease })).TTL).toBe('-1'), {
      timeout: 10_000,
      interval: 100,
    });
    const outcome = await vi.waitFor(() => store.reserveQuotaSlot('ns', 'b', 1, 100), { timeout: 8_000, interval: 100 });
    expect(outcome).toEqual({ reserved: true });
    expect((await rawKey(raw, `${prefix}slot/ns#b`))?.lease).not.toBe(lease);
  }, 30_000);

  it('a lease grant that failed is not kept: the next record of that second gets a lease of its own', async () => {
    const proxy = await FaultProxy.start(cluster.members[0]?.clientPort as number);
    try {
      const clock = new FakeClock(ALIGNED_START_MS);
      const store = open({ endpoints: [proxy.url.replace(/^redis:/, 'http:')], commandTimeoutMs: 1_000, clock: clock.now });
      await eventually(() => store.ping(), 10_000);
      // The reservation's read goes through; its lease grant, right after, gets no answer in time.
      const target = store as unknown as { txn: (request: ITxnRequest) => Promise<ITxnResponse> };
      const sent = target.txn.bind(store);
      let slowed = false;
      target.txn = async (request) => {
        const answer = await sent(request);
        if (!slowed) {
          slowed = true;
          proxy.set({ kind: 'delayReplies', delayMs: 2_500 });
        }
        return answer;
      };
      // Ends in 60 s (its bucket's lease would be forgotten only then): the retries below end long before.
      const failed = await store.reserveQuotaSlot('ns', 'a', 60_000, 10).catch((err: unknown) => err);
      proxy.heal();
      delete (target as { txn?: unknown }).txn;
      expect(failed).toBeInstanceOf(StoreUnavailableError);
      const outcome = await vi.waitFor(() => store.reserveQuotaSlot('ns', 'a', 60_000, 10), { timeout: 15_000, interval: 200 });
      expect(outcome).toEqual({ reserved: true });
    } finally {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      await proxy.close();
    }
  }, 60_000);
});
