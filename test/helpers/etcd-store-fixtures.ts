import { Etcd3, type IKeyValue, type ITxnRequest, type ITxnResponse } from 'etcd3';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from './etcd-cluster.js';
import { FakeClock } from './fake-clock.js';
import { eventually } from './redis-store.js';

/**
 * A file's set-up on the shared cluster (EtcdCluster.startShared): the cluster and a plain client of the
 * test's own handed to `use` before its tests; every store a test put in `opened` closed after it; the
 * client and the cluster after the file.
 */
export function etcdForFile(opened: EtcdStore[], use: (cluster: EtcdCluster, raw: Etcd3) => void): void {
  let cluster: EtcdCluster | undefined;
  let raw: Etcd3 | undefined;
  beforeAll(async () => {
    cluster = await EtcdCluster.startShared(1);
    raw = new Etcd3({ hosts: cluster.endpoints });
    use(cluster, raw);
  }, 60_000);
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    raw?.close();
    await cluster?.stop();
  });
}

/**
 * A store under `prefix` on a fake clock from ALIGNED_START_MS (the test moves it), put in `opened` (closed
 * after the test, etcdForFile), resolved once it answers.
 */
export async function openOnFakeClock(
  cluster: EtcdCluster,
  opened: EtcdStore[],
  prefix: string,
): Promise<{ store: EtcdStore; clock: FakeClock; prefix: string }> {
  const clock = new FakeClock(ALIGNED_START_MS);
  const store = new EtcdStore({
    endpoints: cluster.endpoints,
    keyPrefix: prefix,
    commandTimeoutMs: 5_000,
    fenceGraceMs: 1_000,
    clock: clock.now,
  });
  opened.push(store);
  await eventually(() => store.ping(), 10_000);
  return { store, clock, prefix };
}

/** Unix ms on a whole second, so that the store's lease buckets (whole seconds) are exact in a test. */
export const ALIGNED_START_MS = Date.UTC(2030, 0, 1);

/** One key as etcd holds it right now (null: absent), read with a client of the test's own. */
export async function rawKey(raw: Etcd3, key: string): Promise<IKeyValue | null> {
  const res = await raw.kv.range({ key: Buffer.from(key) });
  return res.kvs[0] ?? null;
}

/** A key's JSON value as etcd holds it (null: absent). */
export async function rawJson(raw: Etcd3, key: string): Promise<unknown> {
  const kv = await rawKey(raw, key);
  return kv ? (JSON.parse(kv.value.toString('utf8')) as unknown) : null;
}

type Txn = (request: ITxnRequest) => Promise<ITxnResponse>;

/**
 * Runs `before` ahead of every transaction the store sends from now on (what another instance or an
 * operator does to etcd between the store's read and its write: a real write to the real cluster), and
 * counts them. `before` may itself call the store: the transactions it makes are not passed to it again.
 */
export function beforeEachTxn(
  store: EtcdStore,
  before: (request: ITxnRequest, count: number) => Promise<void> | void,
): { readonly count: () => number; readonly restore: () => void } {
  const target = store as unknown as { txn: Txn };
  const own = Object.getOwnPropertyDescriptor(target, 'txn');
  const original = target.txn.bind(store);
  let count = 0;
  let inside = false;
  target.txn = async (request) => {
    if (inside) return original(request);
    count++;
    inside = true;
    try {
      await before(request, count);
    } finally {
      inside = false;
    }
    return original(request);
  };
  return {
    count: () => count,
    restore: () => {
      if (own) Object.defineProperty(target, 'txn', own);
      else delete (target as { txn?: Txn }).txn;
    },
  };
}
