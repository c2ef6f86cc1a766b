/**
 * The one place etcd key names are built. Lock ids (namespace/key) contain only A-Z a-z 0-9 . _ - : @
 * and one `/`, so `#` safely ends a lock id inside a longer key, and a prefix range never mixes locks.
 *
 *   <prefix>lock/<id>              a lock's pool record (JSON, PoolRecord in etcd-pools.ts; one lease at most)
 *   <prefix>queue/<id>#<waiterId>  a caller queued for a lock (LeaseWaiterRecord); FIFO order = create revision
 *   <prefix>slot/<ns>#<quotaSlotId>  a quota slot ({"e": end ms})
 *   <prefix>slotver/<ns>           bumped by every reservation: the compare-and-set guard of a namespace's count
 *   <prefix>slotoff/<ns>#<quotaSlotId>  a retired quota slot ({"r": until ms}): its lease was force-released,
 *                                  and no renewal counts the slot again (EtcdStore.retireQuotaSlot)
 *   <prefix>pool/<kind>/<id>       a semaphore's or read/write lock's pool record (PoolRecord)
 *   <prefix>pqueue/<kind>/<id>#<waiterId>  a caller queued for a permit; FIFO order = create revision
 *
 * <kind> is `semaphore` or `rwlock` (no `/`), so the same name under each kind is a different key. A
 * lock keeps the names it had before locks were pools (`lock/`, `queue/`), so keys written then are
 * still found (etcd-pools.ts reads their old records).
 */
/** A prefix range of keys, as etcd's range reads and deletes take it. */
export interface KeyRange {
  readonly key: Buffer;
  readonly rangeEnd: Buffer;
}

export class EtcdKeys {
  constructor(private readonly prefix: string) {}

  lock(id: string): Buffer {
    return Buffer.from(`${this.prefix}lock/${id}`);
  }

  lockRange(idPrefix: string): KeyRange {
    return this.range(`lock/${idPrefix}`);
  }

  /** The lock id in a lock record's key, or null. */
  lockIdOf(key: Buffer): string | null {
    const head = `${this.prefix}lock/`;
    const text = key.toString('utf8');
    return text.startsWith(head) ? text.slice(head.length) : null;
  }

  waiter(id: string, waiterId: string): Buffer {
    return Buffer.from(`${this.prefix}queue/${id}#${waiterId}`);
  }

  queue(id: string): KeyRange {
    return this.range(`queue/${id}#`);
  }

  waiterIdOf(key: Buffer): string {
    const text = key.toString('utf8');
    return text.slice(text.lastIndexOf('#') + 1);
  }

  quotaSlot(namespace: string, quotaSlotId: string): Buffer {
    return Buffer.from(`${this.prefix}slot/${namespace}#${quotaSlotId}`);
  }

  quotaSlots(namespace: string): KeyRange {
    return this.range(`slot/${namespace}#`);
  }

  /** Outside the namespace's slot range (quotaSlots), so a reservation reads no retired slot. */
  retiredQuotaSlot(namespace: string, quotaSlotId: string): Buffer {
    return Buffer.from(`${this.prefix}slotoff/${namespace}#${quotaSlotId}`);
  }

  quotaSlotVersion(namespace: string): Buffer {
    return Buffer.from(`${this.prefix}slotver/${namespace}`);
  }

  pool(kind: string, id: string): Buffer {
    return Buffer.from(`${this.prefix}pool/${kind}/${id}`);
  }

  poolRange(kind: string, idPrefix: string): KeyRange {
    return this.range(`pool/${kind}/${idPrefix}`);
  }

  /** The permit key's id in a pool record's key, or null. */
  poolIdOf(kind: string, key: Buffer): string | null {
    const head = `${this.prefix}pool/${kind}/`;
    const text = key.toString('utf8');
    return text.startsWith(head) ? text.slice(head.length) : null;
  }

  permitWaiter(kind: string, id: string, waiterId: string): Buffer {
    return Buffer.from(`${this.prefix}pqueue/${kind}/${id}#${waiterId}`);
  }

  permitQueue(kind: string, id: string): KeyRange {
    return this.range(`pqueue/${kind}/${id}#`);
  }

  /** The record of a key of any kind: a lock's under `lock/`, the others' under `pool/<kind>/`. */
  leaseRecord(kind: string, id: string): Buffer {
    return kind === 'lock' ? this.lock(id) : this.pool(kind, id);
  }

  leaseRecords(kind: string, idPrefix: string): KeyRange {
    return kind === 'lock' ? this.lockRange(idPrefix) : this.poolRange(kind, idPrefix);
  }

  leaseIdOf(kind: string, key: Buffer): string | null {
    return kind === 'lock' ? this.lockIdOf(key) : this.poolIdOf(kind, key);
  }

  leaseWaiter(kind: string, id: string, waiterId: string): Buffer {
    return kind === 'lock' ? this.waiter(id, waiterId) : this.permitWaiter(kind, id, waiterId);
  }

  leaseQueue(kind: string, id: string): KeyRange {
    return kind === 'lock' ? this.queue(id) : this.permitQueue(kind, id);
  }

  ping(): Buffer {
    return Buffer.from(`${this.prefix}ping`);
  }

  /** Every key this store writes (for tests and operators). */
  all(): KeyRange {
    return this.range('');
  }

  /** Every key starting with the prefix and then `head`. */
  private range(head: string): KeyRange {
    const key = Buffer.from(this.prefix + head);
    return { key, rangeEnd: prefixEnd(key) };
  }
}

/** The smallest key above every key starting with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  // Stryker disable next-line ArithmeticOperator: past the end reads undefined, never below 0xff: the last byte still goes up first
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}
