/**
 * The one place Redis key names are built.
 *
 * Hash tags: a lock id of the form `group/name` (the lock service's `namespace/key`) is tagged by its
 * group, `{group}`; an id without `/` is tagged by itself. So every key of one namespace (its locks,
 * their wait queues, its quota slots) maps to one Redis Cluster slot, and a script may touch any of
 * them together (a lock and its namespace's quota, or all the locks of one lock set). The price: one
 * namespace lives on one Cluster shard; a Cluster spreads namespaces, not the locks of one namespace.
 * Lock ids cannot contain braces (the API allows A-Z a-z 0-9 . _ - : @ and namespaces no braces
 * either), so the tag is always exactly the group.
 *
 * Layout, for prefix P and id `ns/key`: lock hash `P{ns}/key`, its wait queue `P{ns}q/key`, its
 * waiter records `P{ns}w/key`, the namespace's quota slots `Pslots:{ns}`. The kind letter sits
 * between the tag and the name, so a lock named `a:q` can never be taken for the queue of `a`.
 */
export interface LockKeys {
  /** The hash holding the lease and the last fencing token. */
  readonly lock: string;
  /** The wait queue: waiter ids in arrival order (ZSET). */
  readonly queue: string;
  /** The waiter records: waiter id -> its record (HASH). */
  readonly waiters: string;
  /** The quota slots of the lock's group (namespace): the same hash tag, so the same Cluster slot. */
  readonly slots: string;
}

/**
 * The keys of one semaphore or read/write lock (see permit-store.ts): its pool hash (capacity, last
 * fencing token, units in use, one field per live lease), its wait queue and waiter records (laid out
 * as a lock's), and its leases' ends (ZSET owner token -> end, Unix ms) to find ended ones in order.
 */
export interface PermitKeys {
  readonly pool: string;
  readonly queue: string;
  readonly waiters: string;
  readonly expiries: string;
}

/** The kind letter of each multi-holder primitive's keys: `P{ns}s/key` a semaphore, `P{ns}r/key` a read/write lock. */
export const PERMIT_KIND_LETTER = { semaphore: 's', rwlock: 'r' } as const;

/** The separator between an id's group (its hash tag) and the rest of it. */
const GROUP_SEPARATOR = '/';

/** Splits an id into its hash-tag group and the name inside the group ('' when the id has no group). */
export function splitId(id: string): { group: string; name: string } {
  const at = id.indexOf(GROUP_SEPARATOR);
  return at <= 0 ? { group: id, name: '' } : { group: id.slice(0, at), name: id.slice(at + 1) };
}

export class KeySpace {
  constructor(private readonly prefix: string) {}

  /**
   * The Redis key of kind `kind` ('' for a lock hash; one letter for the others) for lock id `id`.
   * New kinds of per-lock state (other primitives) take a new letter here, so they share the slot.
   */
  tagged(id: string, kind: string): string {
    const { group, name } = splitId(id);
    return name === '' && !id.includes(GROUP_SEPARATOR)
      ? `${this.prefix}{${group}}${kind}`
      : `${this.prefix}{${group}}${kind}${GROUP_SEPARATOR}${name}`;
  }

  /** The hash holding a lock's lease and its last fencing token. */
  lock(id: string): string {
    return this.tagged(id, '');
  }

  /** The keys of a lock, its wait queue and its namespace's quota: lock hash, queue (ZSET), waiter records (HASH), slots (ZSET). */
  lockKeys(id: string): LockKeys {
    return { lock: this.lock(id), queue: this.tagged(id, 'q'), waiters: this.tagged(id, 'w'), slots: this.slots(splitId(id).group) };
  }

  /** The keys of a semaphore (`s`, `sq`, `sw`, `se`) or read/write lock (`r`, `rq`, `rw`, `re`). */
  permitKeys(kind: keyof typeof PERMIT_KIND_LETTER, id: string): PermitKeys {
    const letter = PERMIT_KIND_LETTER[kind];
    return {
      pool: this.tagged(id, letter),
      queue: this.tagged(id, `${letter}q`),
      waiters: this.tagged(id, `${letter}w`),
      expiries: this.tagged(id, `${letter}e`),
    };
  }

  /** Pub/sub channel prefix on which hand-overs are announced to the waiting caller's instance. */
  grantChannelPrefix(): string {
    return `${this.prefix}grants:`;
  }

  /**
   * Pub/sub channel on which every change of lock `id` is announced (publishChange, _watch.lua). Under the
   * grant prefix, because the scripts already get that; instance ids never contain ':'.
   */
  changeChannel(id: string): string {
    return `${this.grantChannelPrefix()}changed:${id}`;
  }

  /**
   * The sorted set of a namespace's quota slots (member = slot id, score = slot end in Unix ms),
   * tagged by the namespace: the same Cluster slot as the namespace's locks.
   */
  slots(namespace: string): string {
    return `${this.prefix}slots:{${namespace}}`;
  }

  /**
   * The counter of one caller's current rate-limit window (`rateKey` names the API key or address).
   * A key of its own: the rate limiter's batches never share a script with a lock.
   */
  rateWindow(rateKey: string): string {
    return `${this.prefix}ratelimit:${rateKey}`;
  }

  /**
   * A SCAN MATCH pattern for the lock hashes whose lock id starts with `idPrefix` (or, with `kind`, the
   * keys of that kind: a permit pool's letter).
   */
  lockPattern(idPrefix: string, kind = ''): string {
    const at = idPrefix.indexOf(GROUP_SEPARATOR);
    if (at > 0) {
      const group = idPrefix.slice(0, at);
      const rest = idPrefix.slice(at + 1);
      return `${escapeGlob(this.prefix)}{${escapeGlob(group)}}${kind}${GROUP_SEPARATOR}${escapeGlob(rest)}*`;
    }
    // A prefix that ends inside the group: every group that starts with it (lockIdOf drops the rest).
    return `${escapeGlob(this.prefix)}{${escapeGlob(idPrefix)}*`;
  }

  /** The lock id inside a lock hash's name (or a `kind` key's name), or null for a name that is not one. */
  lockIdOf(redisKey: string, kind = ''): string | null {
    const head = `${this.prefix}{`;
    if (!redisKey.startsWith(head)) return null;
    const close = redisKey.indexOf('}', head.length);
    if (close < 0) return null;
    const group = redisKey.slice(head.length, close);
    const tail = redisKey.slice(close + 1);
    if (group === '' || /[{}/]/.test(group)) return null;
    if (tail === kind) return group;
    if (!tail.startsWith(kind + GROUP_SEPARATOR)) return null; // a queue, a waiter hash or another kind
    const name = tail.slice(kind.length + GROUP_SEPARATOR.length);
    return name === '' || /[{}]/.test(name) ? null : `${group}${GROUP_SEPARATOR}${name}`;
  }
}

/** Escapes the characters SCAN MATCH treats as glob syntax, so a prefix matches only itself. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
