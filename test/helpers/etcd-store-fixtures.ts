import type { Etcd3, IKeyValue, ITxnRequest, ITxnResponse } from 'etcd3';
import type { EtcdStore } from '../../src/store/etcd/etcd-store.js';

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
