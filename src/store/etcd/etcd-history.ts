import { Etcd3, type IRequestOp } from 'etcd3';
import { carryLeaseFactsInLines, decodeRecord, encodeRecord, readRecords } from '../../domain/history.js';
import type { HistoryAppend, HistoryKey, HistoryLimits, HistoryRecord, HistoryStore } from '../../domain/history.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import { prefixEnd } from './etcd-keys.js';
import { callEtcd } from './etcd-records.js';

/** Records per transaction at most: with the namespace's count, within etcd's default --max-txn-ops (128). */
const RECORDS_PER_TXN = 100;

/** Tries of one namespace's compare-and-swap before its part of the batch is given up (another instance kept winning). */
const CAS_TRIES = 4;

export interface EtcdHistoryOptions {
  readonly endpoints: readonly string[];
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly limits: HistoryLimits;
}

/**
 * Lease history on etcd: one record per key (`<prefix>history/<namespace>/<primitive>/<key>`) holding its
 * last events, one per line, rewritten by a compare-and-swap per namespace of a batch (per 100 records of it). Retention is an
 * etcd lease: each write attaches the current one, granted for 1.25 x the retention and replaced after a
 * quarter of it, so a record lives between 1 and 1.25 retentions past its last write (reads filter by
 * time anyway). Past keysPerNamespace, the records written least recently (lowest mod revision) go.
 */
export class EtcdHistory implements HistoryStore {
  private readonly client: Etcd3;
  private lease: { id: Promise<string>; grantedAt: number } | null = null;
  private closed = false;

  constructor(private readonly options: EtcdHistoryOptions) {
    // No dialTimeout: etcd3 1.1 declares it but never reads it; each call carries its own deadline (callOptions).
    this.client = new Etcd3({ hosts: [...options.endpoints] });
  }

  private namespacePrefix(namespace: string): Buffer {
    return Buffer.from(`${this.options.keyPrefix}history/${namespace}/`);
  }

  private recordKey(key: HistoryKey): Buffer {
    return Buffer.concat([this.namespacePrefix(key.namespace), Buffer.from(`${key.primitive}/${key.key}`)]);
  }

  async append(batch: readonly HistoryAppend[]): Promise<void> {
    const byNamespace = new Map<string, Map<string, { key: Buffer; events: string[] }>>();
    for (const { record, ...key } of batch) {
      let records = byNamespace.get(key.namespace);
      if (!records) {
        records = new Map();
        byNamespace.set(key.namespace, records);
      }
      const name = `${key.primitive}/${key.key}`;
      let entry = records.get(name);
      if (!entry) {
        entry = { key: this.recordKey(key), events: [] };
        records.set(name, entry);
      }
      entry.events.push(encodeRecord(record));
    }
    await Promise.all(
      [...byNamespace].map(async ([namespace, records]) => {
        // etcd refuses a transaction of more than 128 operations (--max-txn-ops): a namespace's records
        // go in parts of RECORDS_PER_TXN, one after another (each part evicts past the cap on its own).
        const all = [...records.values()];
        // Stryker disable next-line EqualityOperator: one more, empty part writes nothing (the part before it evicted past the cap)
        for (let from = 0; from < all.length; from += RECORDS_PER_TXN) {
          await this.appendNamespace(namespace, all.slice(from, from + RECORDS_PER_TXN));
        }
      }),
    );
  }

  private async appendNamespace(namespace: string, records: { key: Buffer; events: string[] }[]): Promise<void> {
    const { eventsPerKey, keysPerNamespace, retentionMs } = this.options.limits;
    const prefix = this.namespacePrefix(namespace);
    const lease = await this.currentLease();
    for (let attempt = 1; ; attempt++) {
      const read = await this.call(() =>
        this.client.kv.txn(
          {
            success: [
              // Stryker disable next-line BooleanLiteral: the count comes with the keys too; count_only only spares reading them
              { request_range: { key: prefix, range_end: prefixEnd(prefix), count_only: true } },
              ...records.map((r): IRequestOp => ({ request_range: { key: r.key } })),
            ],
          },
          this.callOptions(),
        ),
      );
      // Stryker disable next-line OptionalChaining: a transaction without compares answers one response per operation
      const count = Number(read.responses[0]?.response_range.count ?? 0);
      const oldest = Date.now() - retentionMs;
      let added = 0;
      const compare = records.map((r, i) => {
        // Stryker disable next-line OptionalChaining: a transaction without compares answers one response per operation
        const kv = read.responses[i + 1]?.response_range.kvs[0];
        if (!kv) added++;
        return kv
          ? { key: r.key, target: 'Mod' as const, result: 'Equal' as const, mod_revision: kv.mod_revision }
          : { key: r.key, target: 'Version' as const, result: 'Equal' as const, version: 0 };
      });
      const puts = records.map((r, i): IRequestOp => {
        // Stryker disable next-line OptionalChaining: a transaction without compares answers one response per operation
        const kv = read.responses[i + 1]?.response_range.kvs[0];
        // Stryker disable next-line ArrayDeclaration: a line that cannot be read counts as past the retention: dropped, as if none
        const stored = kv ? kv.value.toString().split('\n') : [];
        // The lines within the retention, then the last eventsPerKey of them with the batch's.
        const current = stored.map((line) => (decodeRecord(line)?.at ?? 0) >= oldest);
        const all = [...stored, ...r.events];
        let within = r.events.length;
        for (const ok of current) if (ok) within++;
        let skip = Math.max(0, within - eventsPerKey);
        const keep = all.map((_, i) => {
          if (i < stored.length && !current[i]) return false;
          if (skip === 0) return true;
          skip--;
          return false;
        });
        // A lease's lock-delay, holder and grant time outlive its grant's line (see carryLeaseFacts).
        carryLeaseFactsInLines(all, keep);
        const lines = all.filter((_, i) => keep[i]);
        return { request_put: { key: r.key, value: Buffer.from(lines.join('\n')), lease } };
      });
      const write = await this.call(() => this.client.kv.txn({ compare, success: puts }, this.callOptions()));
      if (write.succeeded) {
        if (count + added > keysPerNamespace) await this.evict(prefix, count + added - keysPerNamespace);
        return;
      }
      if (attempt >= CAS_TRIES) throw new StoreUnavailableError('history: another instance kept changing these records');
    }
  }

  /** Deletes the `over` records of a namespace written least recently. */
  private async evict(prefix: Buffer, over: number): Promise<void> {
    const oldest = await this.call(() =>
      this.client.kv.range(
        // Stryker disable next-line BooleanLiteral: only the keys are used; keys_only only spares reading the values
        { key: prefix, range_end: prefixEnd(prefix), sort_target: 'Mod', sort_order: 'Ascend', limit: over, keys_only: true },
        this.callOptions(),
      ),
    );
    // Stryker disable next-line EqualityOperator: one more, empty delete transaction deletes nothing
    for (let from = 0; from < oldest.kvs.length; from += RECORDS_PER_TXN) {
      const part = oldest.kvs.slice(from, from + RECORDS_PER_TXN);
      await this.call(() =>
        this.client.kv.txn({ success: part.map((kv): IRequestOp => ({ request_delete_range: { key: kv.key } })) }, this.callOptions()),
      );
    }
  }

  /** The lease writes attach: replaced after a quarter of the retention, living 1.25 retentions. */
  private currentLease(): Promise<string> {
    const { retentionMs } = this.options.limits;
    const now = Date.now();
    if (!this.lease || now - this.lease.grantedAt > retentionMs / 4) {
      const ttl = Math.max(1, Math.ceil((retentionMs * 1.25) / 1000));
      const id = this.call(() => this.client.leaseClient.leaseGrant({ TTL: ttl }, this.callOptions())).then((r) => r.ID);
      const lease = { id, grantedAt: now };
      this.lease = lease;
      id.catch(() => {
        if (this.lease === lease) this.lease = null;
      });
    }
    return this.lease.id;
  }

  async read(key: HistoryKey): Promise<HistoryRecord[]> {
    const res = await this.call(() => this.client.kv.range({ key: this.recordKey(key) }, this.callOptions()));
    const value = res.kvs[0]?.value.toString() ?? '';
    const oldest = Date.now() - this.options.limits.retentionMs;
    return readRecords(value.split('\n'), oldest, this.options.limits.eventsPerKey);
  }

  close(): Promise<void> {
    this.closed = true;
    this.client.close();
    return Promise.resolve();
  }

  private callOptions() {
    return { deadline: Date.now() + this.options.commandTimeoutMs };
  }

  private call<T>(run: () => Promise<T>): Promise<T> {
    return callEtcd(this.closed, 'etcd history', run);
  }
}
