import { slotOf } from './slot.js';
import type { HistoryPrimitive } from '../../domain/history.js';
import type { PermitKind } from '../../domain/permit-values.js';

/**
 * The one place Redis key names are built.
 *
 * Shards: a lock id of the form `group/name` (the lock service's `namespace/key`) lives in one of
 * QUOTA_SHARDS shards of its group, chosen by the name's hash. Every key of a shard carries the
 * shard's hash tag `{group#n}`, so one Redis Cluster slot holds the shard's locks, their queues and
 * the shard's part of the namespace quota, and a lock script may touch all of them in one atomic step.
 * The n of each shard is picked (and cached) so that the shards' slots lie in QUOTA_SHARDS evenly
 * spaced ranges of the 16,384 Cluster slots: a Cluster whose masters own even slot ranges (what
 * `redis-cli --cluster create` gives) holds an even share of every namespace's shards, so one
 * namespace's locks spread over every master. An id without `/` is a group of its own (shard 0).
 * Lock ids cannot contain braces or `#` (the API allows A-Z a-z 0-9 . _ - : @ in keys, and
 * namespaces no braces or `#` either), so the tag always reads back as exactly the group.
 *
 * Layout, for prefix P, id `ns/key` in shard tag T = `ns#n`: lock hash `P{T}/key`, its wait queue
 * `P{T}q/key`, its waiter records `P{T}w/key`; the shard's quota count `P{T}Q` and quota ends `P{T}E`
 * (_quota.lua). The kind letter sits between the tag and the name, so a lock named `a:q` can never be
 * taken for the queue of `a`. docs/limits.md states what the sharded quota bounds; docs/operations.md
 * how to move a deployment from the layout before shards (tag `{ns}`) to this one.
 */

/**
 * Shards per namespace. Part of the key layout: changing it moves every key (see docs/operations.md).
 * 16 spreads a namespace evenly over up to 16 masters (and still at most one shard apart over more),
 * and keeps the quota's rounding (docs/limits.md) at most 15 leases above the limit.
 */
export const QUOTA_SHARDS = 16;

/**
 * Units per shard the quota aims at: a shard this large fills (with uniformly spread keys) only once
 * the namespace holds about 90% of its limit or more (docs/limits.md).
 */
export const UNITS_PER_SHARD = 600;

/**
 * How many of a namespace's shards its quota counts in, for a limit of `limit` leases: one per
 * UNITS_PER_SHARD of the limit, at least 1 (an exact count), at most QUOTA_SHARDS. Only a limit that
 * uses every shard can be counted inside the lock scripts (a lock's unit must sit in its own shard);
 * a smaller one is counted through the quota-slot calls (LeaseStore.quotaInsideFrom).
 */
export function quotaShardsFor(limit: number): number {
  return Math.min(QUOTA_SHARDS, Math.max(1, Math.floor(limit / UNITS_PER_SHARD)));
}

/** The smallest limit counted in every shard, so inside the lock scripts. */
export const QUOTA_INSIDE_FROM = QUOTA_SHARDS * UNITS_PER_SHARD;

/**
 * The most units one quota shard admits for a namespace limit of `limit` leases (0: no quota): the
 * limit over the shards it is counted in, rounded up (docs/limits.md: the bound this gives).
 */
export function shardCap(limit: number): number {
  return limit > 0 ? Math.ceil(limit / quotaShardsFor(limit)) : 0;
}

/**
 * The cap of each shard when the lock scripts count the quota (every shard: see quotaShardsFor). The
 * lock service asks for that only from QUOTA_INSIDE_FROM on; a store caller may ask for any cap.
 */
export function insideCap(limit: number): number {
  return limit > 0 ? Math.ceil(limit / QUOTA_SHARDS) : 0;
}

/** Redis Cluster's number of hash slots. */
const CLUSTER_SLOTS = 16384;

/** The two keys of one quota shard (see _quota.lua). */
export interface QuotaKeys {
  /** HASH: n = units counted, m = earliest counted second, x = latest, and units per ending second. */
  readonly count: string;
  /** ZSET: the counted seconds (and units taken through the quota-slot calls, "u:" + id), by second. */
  readonly ends: string;
}

export interface LockKeys {
  /** The hash holding the lease and the last fencing token. */
  readonly lock: string;
  /** The wait queue: waiter ids in arrival order (ZSET). */
  readonly queue: string;
  /** The waiter records: waiter id -> its record (HASH). */
  readonly waiters: string;
  /** The quota shard the lock counts in: the same hash tag, so the same Cluster slot. */
  readonly quota: QuotaKeys;
}

/**
 * The keys of one semaphore or read/write lock (see permit-values.ts): its pool hash (capacity, last
 * fencing token, units in use, one field per live lease), its wait queue and waiter records (laid out
 * as a lock's), and its leases' ends (ZSET owner token -> end, Unix ms) to find ended ones in order.
 */
export interface PermitKeys {
  readonly pool: string;
  readonly queue: string;
  readonly waiters: string;
  readonly expiries: string;
}

/**
 * The kind letters of the first two multi-holder primitives' keys, kept as deployments store them:
 * `{ns}s/key` a semaphore, `{ns}r/key` a read/write lock.
 */
const FIRST_KIND_LETTERS: Readonly<Record<string, string>> = { semaphore: 's', rwlock: 'r' };

/**
 * The kind part of a multi-holder primitive's key names: its letter for the first two, and for every
 * later kind `P<kind>:` (`{ns}Ppool:/key`), so a new kind of PERMIT_KINDS needs no entry here. No other
 * key name starts with `P`, and a kind is lower-case letters, so `:` ends it: the queue (`q`), waiters
 * (`w`) and expiries (`e`) suffixes of one kind never read as another kind.
 */
export function permitKindLetter(kind: PermitKind): string {
  return FIRST_KIND_LETTERS[kind] ?? `P${kind}:`;
}

/** The kind part of a key's lease-history list: `hl` a lock's, `hs` and `hr` as above, `hP<kind>:` a later kind's. */
export function historyKindLetter(primitive: HistoryPrimitive): string {
  return primitive === 'lock' ? 'hl' : `h${permitKindLetter(primitive)}`;
}

/** The separator between an id's group (its hash tag) and the rest of it. */
const GROUP_SEPARATOR = '/';

/** Splits an id into its hash-tag group and the name inside the group ('' when the id has no group). */
export function splitId(id: string): { group: string; name: string } {
  const at = id.indexOf(GROUP_SEPARATOR);
  return at <= 0 ? { group: id, name: '' } : { group: id.slice(0, at), name: id.slice(at + 1) };
}

export class KeySpace {
  /** Each group's shard tags, computed once per group (a bounded cache: see shardTags). */
  private readonly tags = new Map<string, readonly string[]>();
  /**
   * Each shard tag's quota keys, made once: every lock call names its shard's two keys, and a namespace
   * has QUOTA_SHARDS of them. Bounded as the tags are (emptied past 16 shards of 10,000 groups).
   */
  private readonly quotas = new Map<string, QuotaKeys>();

  constructor(private readonly prefix: string) {}

  /**
   * The hash tags of a group's QUOTA_SHARDS shards: tag i is `group#n` for the smallest n whose Cluster
   * slot falls in the i-th of QUOTA_SHARDS equal slot ranges. About QUOTA_SHARDS * ln(QUOTA_SHARDS)
   * CRC16s of a short string per group (some 60 for 16 shards), once.
   */
  shardTags(group: string): readonly string[] {
    const known = this.tags.get(group);
    if (known) return known;
    // Stryker disable next-line ArrayDeclaration: the loop fills all QUOTA_SHARDS slots before it ends; the preset length is never seen
    const tags: string[] = new Array<string>(QUOTA_SHARDS);
    let found = 0;
    for (let n = 0; found < QUOTA_SHARDS; n++) {
      const tag = `${group}#${n}`;
      const range = Math.floor((slotOf(tag) * QUOTA_SHARDS) / CLUSTER_SLOTS);
      if (tags[range] === undefined) {
        tags[range] = tag;
        found++;
      }
    }
    // Plenty for every namespace a deployment has at once; past it, start over rather than grow.
    if (this.tags.size >= 10_000) this.tags.clear();
    this.tags.set(group, tags);
    return tags;
  }

  /** The shard a name of a group lives in: its CRC16 (the Cluster's own hash) over the shards. */
  shardOf(name: string): number {
    return slotOf(name) % QUOTA_SHARDS;
  }

  private shardTag(group: string, name: string): string {
    return this.shardTags(group)[this.shardOf(name)] as string;
  }

  /**
   * The Redis key of kind `kind` ('' for a lock hash; one letter for the others) for lock id `id`.
   * New kinds of per-lock state (other primitives) take a new letter here, so they share the slot.
   */
  tagged(id: string, kind: string): string {
    const { group, name } = splitId(id);
    return this.keyIn(this.shardTag(group, name), kind, id, name);
  }

  /** The key of kind `kind` for lock id `id` (whose name inside its group is `name`) under hash tag `tag`. */
  private keyIn(tag: string, kind: string, id: string, name: string): string {
    return name === '' && !id.includes(GROUP_SEPARATOR)
      ? `${this.prefix}{${tag}}${kind}`
      : `${this.prefix}{${tag}}${kind}${GROUP_SEPARATOR}${name}`;
  }

  /** The hash holding a lock's lease and its last fencing token. */
  lock(id: string): string {
    return this.tagged(id, '');
  }

  /** The keys of a lock, its wait queue and its quota shard: lock hash, queue (ZSET), waiter records (HASH), quota. */
  lockKeys(id: string): LockKeys {
    // One split and one shard lookup (a CRC16 of the name) for all four, as each `tagged` would redo
    // them: this runs on every lock call, so the split is splitId's without its result object.
    const at = id.indexOf(GROUP_SEPARATOR);
    const group = at <= 0 ? id : id.slice(0, at);
    const name = at <= 0 ? '' : id.slice(at + 1);
    const tag = this.shardTag(group, name);
    return {
      lock: this.keyIn(tag, '', id, name),
      queue: this.keyIn(tag, 'q', id, name),
      waiters: this.keyIn(tag, 'w', id, name),
      quota: this.quotaShard(tag),
    };
  }

  /**
   * The quota shard a unit taken through the quota-slot calls (semaphores, read/write locks, lock sets)
   * counts in: the shard of its unit id within the namespace.
   */
  quotaFor(namespace: string, unitId: string, limit: number): QuotaKeys {
    // The unit's own hash over the shards in use (not shardOf's 16 folded: uneven when 16 is not a multiple).
    return this.quotaShard(this.shardTags(namespace)[slotOf(unitId) % quotaShardsFor(limit)] as string);
  }

  /** Every quota shard of a namespace (for tests and inspection). */
  quotaShards(namespace: string): QuotaKeys[] {
    return this.shardTags(namespace).map((tag) => this.quotaShard(tag));
  }

  private quotaShard(tag: string): QuotaKeys {
    let keys = this.quotas.get(tag);
    if (keys === undefined) {
      if (this.quotas.size >= 160_000) this.quotas.clear();
      keys = Object.freeze({ count: `${this.prefix}{${tag}}Q`, ends: `${this.prefix}{${tag}}E` });
      this.quotas.set(tag, keys);
    }
    return keys;
  }

  /** The keys of a semaphore (`s`, `sq`, `sw`, `se`) or read/write lock (`r`, `rq`, `rw`, `re`). */
  permitKeys(kind: PermitKind, id: string): PermitKeys {
    const letter = permitKindLetter(kind);
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
      return `${escapeGlob(this.prefix)}{${escapeGlob(group)}#*}${kind}${GROUP_SEPARATOR}${escapeGlob(rest)}*`;
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
    const tag = /^([^{}/#]+)#\d+$/.exec(redisKey.slice(head.length, close));
    if (!tag) return null;
    const group = tag[1] as string;
    const tail = redisKey.slice(close + 1);
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
