import { Etcd3, type ITxnRequest, type ITxnResponse } from 'etcd3';
import type { LeaseAcquire, LeaseKind } from '../../src/domain/lease-store.js';
import type { Clock } from '../../src/store/shared/clock.js';
import { EtcdKeys } from '../../src/store/etcd/etcd-keys.js';
import { EtcdLeases, type EtcdLeasesDeps } from '../../src/store/etcd/etcd-leases.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { afterAll, beforeAll } from 'vitest';
import { EtcdCluster } from './etcd-cluster.js';
import { eventually } from './redis-store.js';

/**
 * What the etcd lease engine's tests (test/etcd/leases-*.test.ts) share: a store over a real cluster, a
 * plain etcd client to read and write its records as another keyholder instance would, and an engine
 * over the store's own plumbing whose transactions a test can make lose their compare (another instance
 * changed the record first).
 */
export interface LeasesFixture {
  readonly store: EtcdStore;
  readonly keys: EtcdKeys;
  /** A plain client on the same cluster (another instance's writes, raw reads). */
  readonly raw: Etcd3;
  close(): Promise<void>;
}

export async function leasesFixture(cluster: EtcdCluster, keyPrefix: string, clock?: Clock): Promise<LeasesFixture> {
  const store = new EtcdStore({
    endpoints: cluster.endpoints,
    keyPrefix,
    commandTimeoutMs: 5_000,
    fenceGraceMs: 60_000,
    ...(clock ? { clock } : {}),
  });
  await eventually(() => store.ping(), 10_000);
  const raw = new Etcd3({ hosts: cluster.endpoints });
  return {
    store,
    keys: new EtcdKeys(keyPrefix),
    raw,
    async close() {
      await store.close();
      raw.close();
    },
  };
}

/**
 * A file's fixture on the shared cluster (EtcdCluster.startShared): made before its tests and handed to
 * `use` with the cluster, closed after them.
 */
export function fixtureForFile(keyPrefix: string, clock: Clock | undefined, use: (f: LeasesFixture, cluster: EtcdCluster) => void): void {
  let cluster: EtcdCluster | undefined;
  let made: LeasesFixture | undefined;
  beforeAll(async () => {
    cluster = await EtcdCluster.startShared(1);
    made = await leasesFixture(cluster, keyPrefix, clock);
    use(made, cluster);
  }, 60_000);
  afterAll(async () => {
    await made?.close();
    await cluster?.stop();
  });
}

/** A one-key acquire of `kind` (a lock: capacity and weight 1). */
export function one(kind: LeaseKind, id: string, ownerToken: string, more: Partial<LeaseAcquire> = {}): LeaseAcquire {
  return { kind, ids: [id], ownerToken, ttlMs: 60_000, holder: `h-${ownerToken}`, capacity: 1, weight: 1, ...more };
}

/** A waiter record as an instance queues it (etcd-leases.ts enqueue): `d` its wait's end, `s` when it queued. */
export interface RawWaiter {
  readonly o: string;
  readonly ttl: number;
  readonly d: number;
  readonly h: string | null;
  readonly s: number;
  readonly w?: number;
  readonly c?: number;
}

/** Queues callers of another instance, in order (each its own write: the create revision is the place). */
export async function queueRaw(
  f: LeasesFixture,
  kind: LeaseKind,
  id: string,
  waiters: ReadonlyArray<RawWaiter | string>,
): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, w] of waiters.entries()) {
    const waiterId = `w${String(i).padStart(3, '0')}`;
    await f.raw.put(f.keys.leaseWaiter(kind, id, waiterId)).value(typeof w === 'string' ? w : JSON.stringify(w));
    ids.push(waiterId);
  }
  return ids;
}

/** Queues many callers of another instance in one write (the same create revision; etcd then orders them by key). */
export async function queueRawAtOnce(f: LeasesFixture, kind: LeaseKind, id: string, from: number, waiters: readonly RawWaiter[]) {
  await f.raw.kv.txn({
    success: waiters.map((w, i) => ({
      request_put: { key: f.keys.leaseWaiter(kind, id, `w${String(from + i).padStart(3, '0')}`), value: Buffer.from(JSON.stringify(w)) },
    })),
  });
}

/** How many waiter records the key's queue holds (live or not). */
export async function queueLength(f: LeasesFixture, kind: LeaseKind, id: string): Promise<number> {
  const q = f.keys.leaseQueue(kind, id);
  const res = await f.raw.kv.range({ key: q.key, range_end: q.rangeEnd, count_only: true });
  return Number(res.count);
}

/** The pool record of a key as stored, or null. */
export async function poolRecord(f: LeasesFixture, kind: LeaseKind, id: string): Promise<{ value: PoolJson; modRevision: number } | null> {
  const res = await f.raw.kv.range({ key: f.keys.leaseRecord(kind, id) });
  const kv = res.kvs[0];
  return kv ? { value: JSON.parse(kv.value.toString()) as PoolJson, modRevision: Number(kv.mod_revision) } : null;
}

export interface PoolJson {
  c: number;
  x: number;
  l: Array<{ o: string; w: number; e: number; h: string | null; t: number; d?: number; i?: string }>;
  g?: string[];
  f?: number;
  k: number;
}

/** Writes a pool record as another instance would (with no etcd lease: the test cleans up). */
export async function putPool(f: LeasesFixture, kind: LeaseKind, id: string, value: PoolJson): Promise<void> {
  await f.raw.put(f.keys.leaseRecord(kind, id)).value(JSON.stringify(value));
}

/**
 * An engine over `store`'s own plumbing whose transactions pass through `before`: called with each
 * transaction that compares (a change), before etcd sees it, to make it lose (another instance writes first)
 * or fail; every transaction (a read too) passes through `after` once etcd has answered it (another
 * instance's write right after, or a test that watches what the engine does). Counts the changes.
 */
export function engineWith(
  store: EtcdStore,
  before: (request: ITxnRequest, n: number) => Promise<void>,
  after?: (request: ITxnRequest, response: ITxnResponse) => Promise<void>,
): { engine: EtcdLeases; changes: () => number } {
  const deps = (store.engine as unknown as { deps: EtcdLeasesDeps }).deps;
  let n = 0;
  const txn = async (request: ITxnRequest): Promise<ITxnResponse> => {
    const change = (request.compare?.length ?? 0) > 0;
    if (change) await before(request, ++n);
    const response = await deps.txn(request);
    if (after) await after(request, response);
    return response;
  };
  return { engine: new EtcdLeases({ ...deps, txn }), changes: () => n };
}

/** Another instance's write to the record a change compares: rewrites it as it is (its mod revision moves). */
export async function touch(f: LeasesFixture, key: Buffer): Promise<void> {
  const res = await f.raw.kv.range({ key });
  const kv = res.kvs[0];
  if (kv) await f.raw.kv.put({ key, value: kv.value });
  else await f.raw.kv.put({ key, value: Buffer.from('{}') });
}

/**
 * `answer`, or 'still waiting' if it has not come within `ms`: for a caller that must be answered as soon
 * as something finds its grant, well before its own wait would run out (then it is answered anyway).
 */
export function answeredWithin<T>(answer: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>((resolve) => (timer = setTimeout(() => resolve('still waiting'), ms)));
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}
