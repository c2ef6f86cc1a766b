/**
 * The one place Redis key names are built. Each lock's keys carry the lock key as a hash tag (`{…}`),
 * so every key one script touches maps to one Redis Cluster slot. Lock keys cannot contain braces
 * (the API only allows A-Z a-z 0-9 . _ - : @), so the tag is always exactly the lock key.
 */
export class KeySpace {
  constructor(private readonly prefix: string) {}

  /** The hash holding a lock's lease and its last fencing token. */
  lock(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  /** The three keys a waiting-aware script takes: lock hash, wait queue (ZSET), waiter records (HASH). */
  lockWithQueue(key: string): [string, string, string] {
    const lock = this.lock(key);
    return [lock, `${lock}:q`, `${lock}:w`];
  }

  /** Pub/sub channel prefix on which hand-overs are announced to the waiting caller's instance. */
  grantChannelPrefix(): string {
    return `${this.prefix}grants:`;
  }
}
