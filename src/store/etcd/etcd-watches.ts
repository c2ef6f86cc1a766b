import type { Etcd3 } from 'etcd3';

/** What the watches tell: a waiter of this instance was handed its lease. */
interface HandOverRoom {
  hasWaitersOn(roomKey: string): boolean;
  granted(waiterId: string): void;
}

/**
 * One etcd watch per record (a lock record, a permit pool) this instance has callers waiting on: a put
 * of the record names the waiters it handed a lease to. A watch is dropped once nobody here waits on
 * its record any more (looked at every 5 s).
 */
export class HandOverWatches {
  private readonly watchers = new Map<string, Promise<{ cancel(): Promise<void> }>>();

  constructor(
    private readonly client: Etcd3,
    private readonly room: HandOverRoom,
  ) {}

  /** The watch on `recordKey` for the room's `roomKey`, made if there is none; resolves once it is live. */
  open(roomKey: string, recordKey: Buffer, handedTo: (value: Buffer) => readonly string[]): Promise<unknown> {
    let watcher = this.watchers.get(roomKey);
    if (!watcher) {
      watcher = this.client
        .watch()
        .key(recordKey)
        .only('put')
        .create()
        .then((w) => {
          w.on('put', (kv) => {
            for (const waiterId of handedTo(kv.value)) this.room.granted(waiterId);
          });
          w.on('error', () => undefined);
          return w;
        });
      this.watchers.set(roomKey, watcher);
      watcher.catch(() => this.watchers.delete(roomKey));
      const sweep = setInterval(() => {
        if (this.room.hasWaitersOn(roomKey)) return;
        clearInterval(sweep);
        this.watchers.delete(roomKey);
        // Stryker disable next-line OptionalChaining: watcher is always set here (made just above)
        void watcher?.then((w) => w.cancel()).catch(() => undefined);
      }, 5_000);
      sweep.unref();
    }
    return watcher;
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.watchers.values()].map(async (w) => (await w).cancel()));
  }
}
