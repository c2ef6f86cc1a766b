/**
 * The one place Redis key names are built. Each lock's keys carry the lock key as a hash tag (`{…}`),
 * so every key one script touches maps to one Redis Cluster slot. Lock keys cannot contain braces
 * (the API only allows A-Z a-z 0-9 . _ - : @), so the tag is always exactly the lock key.
 */
export interface LockKeys {
  /** The hash holding the lease and the last fencing token. */
  readonly lock: string;
  /** The wait queue: waiter ids in arrival order (ZSET). */
  readonly queue: string;
  /** The waiter records: waiter id -> its record (HASH). */
  readonly waiters: string;
}

export class KeySpace {
  constructor(private readonly prefix: string) {}

  /** The hash holding a lock's lease and its last fencing token. */
  lock(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  /** The keys of a lock and its wait queue: lock hash, wait queue (ZSET), waiter records (HASH). */
  lockKeys(key: string): LockKeys {
    const lock = this.lock(key);
    return { lock, queue: `${lock}:q`, waiters: `${lock}:w` };
  }

  /** Pub/sub channel prefix on which hand-overs are announced to the waiting caller's instance. */
  grantChannelPrefix(): string {
    return `${this.prefix}grants:`;
  }
  /**
   * The sorted set of a namespace's quota slots (member = slot id, score = slot end in Unix ms). Its
   * own key, tagged by the namespace: slot scripts touch only this key, so they work on a Cluster too.
   */
  slots(namespace: string): string {
    return `${this.prefix}slots:{${namespace}}`;
  }

  /** A SCAN MATCH pattern for the lock hashes whose lock id starts with `idPrefix`. */
  lockPattern(idPrefix: string): string {
    return `${escapeGlob(this.prefix)}{${escapeGlob(idPrefix)}*}`;
  }

  /** The lock id inside a lock hash's name, or null for a name that is not a lock hash. */
  lockIdOf(redisKey: string): string | null {
    const head = `${this.prefix}{`;
    if (!redisKey.startsWith(head) || !redisKey.endsWith('}')) return null;
    const id = redisKey.slice(head.length, -1);
    return id === '' || /[{}]/.test(id) ? null : id;
  }
}

/** Escapes the characters SCAN MATCH treats as glob syntax, so a prefix matches only itself. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
