import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, vi } from 'vitest';
import type { Store } from '../../src/domain/lease-store.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from './etcd-cluster.js';

/** One etcd member, for cases that concern the etcd store alone. */
export function etcdOnly(prefix: string): Array<[string, () => Promise<Store>]> {
  let etcd: EtcdCluster;
  beforeAll(async () => {
    etcd = await EtcdCluster.start(1);
  }, 60_000);
  afterAll(async () => {
    await etcd?.stop();
  });
  return [['etcd', () => openEtcdStore(etcd, prefix)]];
}

/** An etcd store on `etcd` under a key prefix of its own (`prefix` and a random id), once it answers. */
export async function openEtcdStore(etcd: EtcdCluster, prefix: string): Promise<Store> {
  const store = new EtcdStore({
    endpoints: etcd.endpoints,
    keyPrefix: `${prefix}-${randomUUID()}/`,
    commandTimeoutMs: 5_000,
    fenceGraceMs: 60_000,
  });
  await vi.waitFor(() => store.ping(), { timeout: 10_000, interval: 20 });
  return store;
}
