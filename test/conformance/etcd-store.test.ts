import { afterAll, beforeAll } from 'vitest';
import { Etcd3 } from 'etcd3';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { type LockStore, withWords, type Worded } from '../helpers/store-words.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { EtcdHistory } from '../../src/store/etcd/etcd-history.js';
import { sharedWallClock } from '../../src/store/shared/clock.js';

/** The same contract on a 3-member etcd cluster on loopback. */
let cluster: EtcdCluster;
const PREFIX = 'contract/';

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(3);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

const open = async ({ fenceGraceMs, maxWaitersPerKey }: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> => {
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: PREFIX, commandTimeoutMs: 2_000, fenceGraceMs, maxWaitersPerKey });
  await eventually(() => store.ping(), 10_000);
  return withWords(store);
};

async function withClient<T>(run: (client: Etcd3) => Promise<T>): Promise<T> {
  const client = new Etcd3({ hosts: cluster.endpoints });
  try {
    return await run(client);
  } finally {
    client.close();
  }
}

describeStoreContract('etcd (3 members)', {
  // The store's default clock (it runs in this process).
  clock: sharedWallClock,
  open,
  peer: () => open({ fenceGraceMs: 60_000, maxWaitersPerKey: 5 }),
  // What an operator deleting the keys does; revisions keep counting up regardless.
  loseData: async (store) => {
    await withClient((c) => c.delete().prefix(PREFIX).exec());
    return store;
  },
  hasState: (_store, key) => withClient(async (c) => (await c.getAll().prefix(`${PREFIX}lock/${key}`).count()) > 0),
  collect: (store) => (store as Worded<EtcdStore>).sweep(),
});

describeHistoryContract('etcd (3 members)', {
  open: async (limits) => new EtcdHistory({ endpoints: cluster.endpoints, keyPrefix: PREFIX, commandTimeoutMs: 2_000, limits }),
  stored: (_store, key) =>
    withClient(async (c) => (await c.get(`${PREFIX}history/${key.namespace}/${key.primitive}/${key.key}`).string()) !== null),
  keysKept: (keysPerNamespace) => keysPerNamespace,
  ranksWithinBatch: false,
});
