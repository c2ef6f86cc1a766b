import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Etcd3, KVClient, type ITxnRequest, type ITxnResponse } from 'etcd3';
import { decodeRecord, type HistoryKey, type HistoryLimits } from '../../src/domain/history.js';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdHistory } from '../../src/store/etcd/etcd-history.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';

/**
 * How the etcd history rewrites a key's record (the lines within the retention, the last eventsPerKey of
 * them), caps a namespace, hangs its records on a retention lease, and loses no event to another
 * instance writing the same record.
 */
const PREFIX = 'history-writes/';
let cluster: EtcdCluster;
let client: Etcd3;
const opened: EtcdHistory[] = [];

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  client = new Etcd3({ hosts: cluster.endpoints });
}, 60_000);
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(opened.splice(0).map((h) => h.close()));
});
afterAll(async () => {
  client?.close();
  await cluster?.stop();
});

type Limits = { -readonly [K in keyof HistoryLimits]: HistoryLimits[K] };

function open(limits: Limits, commandTimeoutMs = 10_000): EtcdHistory {
  const history = new EtcdHistory({ endpoints: cluster.endpoints, keyPrefix: PREFIX, commandTimeoutMs, limits });
  opened.push(history);
  return history;
}

let keys = 0;
const newKey = (namespace = `ns${++keys}`): HistoryKey => ({ namespace, primitive: 'lock', key: `k${++keys}` });
const recordKey = (key: HistoryKey) => `${PREFIX}history/${key.namespace}/${key.primitive}/${key.key}`;

/** Appends one released event per name, at the given times. */
function events(key: HistoryKey, ...named: Array<[string, number]>) {
  return named.map(([lease, at]) => ({ ...key, record: { kind: 'released' as const, at, lease } }));
}

/** The events of a key's record as etcd holds it (not as a read filters it). */
async function stored(key: HistoryKey): Promise<string[]> {
  const value = await client.get(recordKey(key)).string();
  return value === null ? [] : value.split('\n').map((line) => decodeRecord(line)?.lease ?? `?${line}`);
}

async function leaseOf(key: HistoryKey): Promise<string> {
  const res = await client.get(recordKey(key)).exec();
  return res.kvs[0]?.lease ?? 'none';
}

async function keysOf(namespace: string): Promise<number> {
  return client.getAll().prefix(`${PREFIX}history/${namespace}/`).count();
}

/**
 * Runs `interfere` before each of the history's compare-and-swap writes (not its reads): another
 * instance's write lands between this one's read and its write.
 */
function beforeWrites(interfere: (writes: number) => Promise<void>): { writes: () => number } {
  let writes = 0;
  const txn = Object.getOwnPropertyDescriptor(KVClient.prototype, 'txn')?.value as (
    this: KVClient,
    req: ITxnRequest,
    options?: Parameters<KVClient['txn']>[1],
  ) => Promise<ITxnResponse>;
  vi.spyOn(KVClient.prototype, 'txn').mockImplementation(async function (this: KVClient, req: ITxnRequest, options) {
    if ((req.compare?.length ?? 0) > 0) {
      writes++;
      await interfere(writes);
    }
    return txn.call(this, req, options);
  });
  return { writes: () => writes };
}

describe('etcd history: what a write keeps of a record', () => {
  const limits = (): Limits => ({ eventsPerKey: 3, keysPerNamespace: 100, retentionMs: 60_000 });

  it('drops the lines older than the retention (one exactly at its edge stays) and keeps the last eventsPerKey', async () => {
    const T = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(T);
    const history = open(limits());
    const key = newKey();
    await history.append(events(key, ['old', T - 60_001], ['edge', T - 60_000], ['c1', T - 10]));
    expect(await stored(key)).toEqual(['old', 'edge', 'c1']);
    await history.append(events(key, ['c2', T]));
    expect(await stored(key)).toEqual(['edge', 'c1', 'c2']);
    await history.append(events(key, ['c3', T], ['c4', T]));
    expect(await stored(key)).toEqual(['c2', 'c3', 'c4']);
  });

  it('counts only the lines within the retention against eventsPerKey', async () => {
    const T = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(T);
    const history = open(limits());
    const key = newKey();
    await history.append(events(key, ['old', T - 60_001], ['c1', T - 5]));
    await history.append(events(key, ['c2', T]));
    expect(await stored(key)).toEqual(['c1', 'c2']);
  });

  it('drops a line it cannot read rather than fail the batch', async () => {
    const history = open(limits());
    const key = newKey();
    const now = Date.now();
    await history.append(events(key, ['c1', now]));
    const value = await client.get(recordKey(key)).string();
    await client.put(recordKey(key)).value(`not a record\n${value ?? ''}`);
    await history.append(events(key, ['c2', now]));
    expect(await stored(key)).toEqual(['c1', 'c2']);
  });
});

describe('etcd history: a namespace capped at keysPerNamespace', () => {
  it('counts a key written again once, and drops the least recently written past the cap', async () => {
    const history = open({ eventsPerKey: 5, keysPerNamespace: 3, retentionMs: 60_000 });
    const namespace = `cap${++keys}`;
    const [k1, k2, k3, k4] = [newKey(namespace), newKey(namespace), newKey(namespace), newKey(namespace)] as const;
    const now = Date.now();
    for (const key of [k1, k2, k3]) await history.append(events(key, [key.key, now]));
    await history.append(events(k1, ['again', now]));
    expect(await keysOf(namespace)).toBe(3);
    expect(await stored(k2)).toEqual([k2.key]);
    await history.append(events(k4, [k4.key, now]));
    expect(await stored(k2)).toEqual([]);
    expect(await stored(k1)).toEqual([k1.key, 'again']);
    expect(await keysOf(namespace)).toBe(3);
  });

  it('deletes more keys than one etcd transaction takes in parts', async () => {
    const namespace = `many${++keys}`;
    const wide = open({ eventsPerKey: 5, keysPerNamespace: 1_000, retentionMs: 60_000 });
    const now = Date.now();
    const many = Array.from({ length: 230 }, () => newKey(namespace));
    await wide.append(many.flatMap((key) => events(key, [key.key, now])));
    expect(await keysOf(namespace)).toBe(230);
    // An instance with a smaller cap (a configuration change) evicts all but one at its next write.
    const narrow = open({ eventsPerKey: 5, keysPerNamespace: 1, retentionMs: 60_000 });
    const last = newKey(namespace);
    await narrow.append(events(last, ['last', now]));
    expect(await keysOf(namespace)).toBe(1);
    expect(await stored(last)).toEqual(['last']);
  });
});

describe('etcd history: another instance writing the same record', () => {
  const limits = (): Limits => ({ eventsPerKey: 10, keysPerNamespace: 100, retentionMs: 60_000 });

  it("re-reads a record another instance changed meanwhile, and loses neither's events", async () => {
    const history = open(limits());
    const key = newKey();
    const now = Date.now();
    await history.append(events(key, ['mine1', now]));
    const other = open(limits());
    beforeWrites(async (n) => {
      if (n === 1) await other.append(events(key, ['theirs', now]));
    });
    await history.append(events(key, ['mine2', now]));
    expect(await stored(key)).toEqual(['mine1', 'theirs', 'mine2']);
  });

  it('gives its part of the batch up with a 503 after 4 lost rounds', async () => {
    const history = open(limits());
    const key = newKey();
    const now = Date.now();
    let lost = 0;
    const spy = beforeWrites(async (n) => {
      // Gives way after 10 rounds, so a store that kept trying would end up writing.
      if (n > 10) return;
      lost++;
      await client.put(recordKey(key)).value(`theirs-${n}`);
    });
    const err = await history.append(events(key, ['mine', now])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toBe('history: another instance kept changing these records');
    expect(spy.writes()).toBe(4);
    expect(lost).toBe(4);
  });
});

describe('etcd history: its retention lease', () => {
  it('hangs records on a lease of 1.25 retentions, replaced once a quarter of the retention has passed', async () => {
    const T = Date.now();
    const now = vi.spyOn(Date, 'now').mockReturnValue(T);
    const history = open({ eventsPerKey: 5, keysPerNamespace: 100, retentionMs: 8_000 });
    const [k1, k2, k3] = [newKey(), newKey(), newKey()];
    await history.append(events(k1, ['a', T]));
    const first = await leaseOf(k1);
    const ttl = await client.leaseClient.leaseTimeToLive({ ID: first });
    expect(Number(ttl.grantedTTL)).toBe(10);
    now.mockReturnValue(T + 2_000);
    await history.append(events(k2, ['b', T + 2_000]));
    expect(await leaseOf(k2)).toBe(first);
    now.mockReturnValue(T + 2_001);
    await history.append(events(k3, ['c', T + 2_001]));
    const second = await leaseOf(k3);
    expect(second).not.toBe(first);
    expect(Number((await client.leaseClient.leaseTimeToLive({ ID: second })).grantedTTL)).toBe(10);
  });

  it('asks for a lease again after etcd refused one', async () => {
    // More than etcd grants (9 x 10^9 s): etcd refuses the lease.
    const limits: Limits = { eventsPerKey: 5, keysPerNamespace: 100, retentionMs: 1e13 };
    const history = open(limits);
    const key = newKey();
    await expect(history.append(events(key, ['a', Date.now()]))).rejects.toThrow(StoreUnavailableError);
    limits.retentionMs = 60_000;
    await history.append(events(key, ['b', Date.now()]));
    expect(await stored(key)).toEqual(['b']);
  });

  it('keeps the newer lease when one asked for before it is refused', async () => {
    const T = Date.now();
    const now = vi.spyOn(Date, 'now').mockReturnValue(T);
    const limits: Limits = { eventsPerKey: 5, keysPerNamespace: 100, retentionMs: 1e13 };
    const history = open(limits);
    const [k1, k2, k3] = [newKey(), newKey(), newKey()];
    const refused = history.append(events(k1, ['a', T]));
    limits.retentionMs = 8_000;
    now.mockReturnValue(T + 2_001);
    const granted = history.append(events(k2, ['b', T + 2_001]));
    await expect(refused).rejects.toThrow(StoreUnavailableError);
    await granted;
    await history.append(events(k3, ['c', T + 2_001]));
    expect(await leaseOf(k3)).toBe(await leaseOf(k2));
  });
});

describe('etcd history: calls', () => {
  it('bounds every call by the command timeout: with none to spare, a batch answers 503', async () => {
    const history = open({ eventsPerKey: 5, keysPerNamespace: 100, retentionMs: 60_000 }, 0);
    const key = newKey();
    const err = await history.append(events(key, ['a', Date.now()])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).outcomeUnknown).toBe(true);
    expect(await stored(key)).toEqual([]);
  });

  it('answers a closed history with a 503 that sent nothing', async () => {
    const history = open({ eventsPerKey: 5, keysPerNamespace: 100, retentionMs: 60_000 });
    const key = newKey();
    await history.close();
    for (const call of [() => history.append(events(key, ['a', Date.now()])), () => history.read(key)]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as StoreUnavailableError).message).toBe('the store is closed');
      expect((err as StoreUnavailableError).outcomeUnknown).toBe(false);
    }
    expect(await stored(key)).toEqual([]);
  });
});
