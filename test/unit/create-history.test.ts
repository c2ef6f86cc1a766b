import { describe, expect, it } from 'vitest';
import { createHistoryStore } from '../../src/store/create-history.js';
import { EtcdHistory } from '../../src/store/etcd/etcd-history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';

/** Lease history lives in the store the leases live in (no connection is made here: etcd's client dials on first use). */
describe('history store from the configuration', () => {
  const limits = { eventsPerKey: 5, keysPerNamespace: 10, retentionMs: 60_000 };

  it('the embedded store keeps its history in this process, within the limits given', async () => {
    const history = createHistoryStore({ kind: 'memory' }, limits);
    expect(history).toBeInstanceOf(MemoryHistory);
    const key = { namespace: 'ns', primitive: 'lock' as const, key: 'k' };
    await history.append(Array.from({ length: 7 }, (_v, i) => ({ ...key, record: { kind: 'released' as const, at: Date.now() + i } })));
    expect(await history.read(key)).toHaveLength(limits.eventsPerKey);
    await history.close();
  });

  it('etcd keeps it in etcd', async () => {
    const history = createHistoryStore({ kind: 'etcd', endpoints: ['127.0.0.1:1'], keyPrefix: 'kh/', commandTimeoutMs: 500 }, limits);
    expect(history).toBeInstanceOf(EtcdHistory);
    await history.close();
  });
});
