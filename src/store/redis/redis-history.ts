import { carryLeaseFacts, encodeRecord, readRecords } from '../../domain/history.js';
import type { HistoryAppend, HistoryKey, HistoryLimits, HistoryPrimitive, HistoryRecord, HistoryStore } from '../../domain/history.js';
import { lockId } from '../../domain/namespaces.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import { closeClient, createRedisClient, type RedisClient, type RedisConnection } from './client.js';
import { historyKindLetter, KeySpace, QUOTA_SHARDS } from './keys.js';
import { masterGate, readyForCalls, whenReadyForCalls, type MasterGate } from './nodes.js';
import { loadScript } from './scripts.js';

/** The append script (see its header): per shard its index and lists, their TTL set on creation or on request. */
const APPEND_LUA = loadScript('history-append.lua');

/**
 * A list's (and a shard index's) TTL is refreshed once per this share of the retention, not on every write: a PEXPIRE per list
 * per flush was one of the three commands a list written again costs (RPUSH, PEXPIRE, its ZADD entry). The TTL sent is
 * the retention plus two of these, so a list written without a refresh, at most one period after its last
 * one, still outlives that write by the retention (the second period covers a call that waited in the
 * client's queue); a key idle for the retention is then dropped at most 2/32 of it later.
 */
const REFRESHES_PER_RETENTION = 32;
/** Lists remembered as refreshed at most: past it the period starts over (more refreshes, never fewer). */
const MAX_REFRESHED = 50_000;
/**
 * Keys whose list and index names are remembered at most, over every namespace and primitive (past it
 * they are all forgotten, and worked out anew): a name is a CRC16 and some slicing and joining, and, the
 * same string again, its hash is not worked out again by the refresh set's and the batch's lookups.
 */
const MAX_NAMES = 50_000;

/** A key's history list and the index of its shard. */
interface ListName {
  readonly list: string;
  readonly index: string;
}

/** The names remembered of one namespace's keys of one primitive, by key text (see nameOf). */
type KnownNames = Map<string, ListName>;

/** A batch's events of one key, oldest first, and the key's list. */
interface KeyEvents {
  readonly name: ListName;
  readonly events: HistoryRecord[];
}

type HistoryClient = RedisClient & {
  historyAppend(args: (string | number)[]): Promise<unknown>;
};

/** Lists per script call, off a Cluster (see append): some 0.5 ms of Redis a call. */
const LISTS_PER_CALL = 64;

export interface RedisHistoryOptions {
  readonly connection: RedisConnection;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly limits: HistoryLimits;
}

/**
 * Lease history on Redis: a capped LIST per key, in the key's own quota shard (the same hash tag as its
 * lock, so history spreads over a Cluster's masters as the locks do), and one index per shard. Its own
 * connection: a batch is one script call (on a Cluster one per shard, sent together), and it never
 * queues behind (or ahead of) the lock scripts. The per-namespace cap is counted per shard: keysPerNamespace / 16,
 * rounded up, each.
 */
export class RedisHistory implements HistoryStore {
  private readonly redis: HistoryClient;
  private readonly keys: KeySpace;
  private readonly perShard: number;
  private connecting: Promise<void> | null = null;
  /** On a Cluster: a call waits for its master's connection when it is being made anew (see call). */
  private readonly gate: MasterGate | null;
  /** How long a refresh holds (ms), and the TTL a refresh sets (ms): see REFRESHES_PER_RETENTION. */
  private readonly refreshMs: number;
  private readonly ttlMs: number;
  /** The lists and indexes whose TTL a call of this period set (or asked for): no refresh until it ends. */
  private refreshed = new Set<string>();
  private periodStart = 0;
  /** See nameOf: by primitive, then namespace, then key text. */
  private readonly names = new Map<HistoryPrimitive, Map<string, KnownNames>>();
  /** How many names `names` holds, all maps together (at most MAX_NAMES). */
  private namesHeld = 0;
  /** The namespace and primitive of the last key named, and their map in `names` (see nameOf). */
  private lastNamespace = '';
  private lastPrimitive: HistoryPrimitive | '' = '';
  private lastNames: KnownNames | null = null;

  constructor(private readonly options: RedisHistoryOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.perShard = Math.max(1, Math.ceil(options.limits.keysPerNamespace / QUOTA_SHARDS));
    // No auto-pipelining: a batch is one call (on a Cluster, one per shard, each sent to its node at
    // once anyway), and ioredis' auto-pipelining files a script by its first argument (the key count,
    // not a key) on a Cluster, so it put shards of other nodes in one pipeline, which the Cluster refused.
    const redis = createRedisClient(options.connection, { commandTimeoutMs: options.commandTimeoutMs, autoPipelining: false });
    redis.defineCommand('historyAppend', { lua: APPEND_LUA });
    this.redis = redis as HistoryClient;
    this.gate = masterGate(redis, options.commandTimeoutMs);
    this.refreshMs = Math.max(1, Math.floor(options.limits.retentionMs / REFRESHES_PER_RETENTION));
    this.ttlMs = options.limits.retentionMs + 2 * this.refreshMs;
    // A new connection may be to a new master (a failover) that lost the last refreshes: all over again.
    redis.on('ready', () => this.refreshed.clear());
  }

  /** Whether a call of this period must set the list's TTL (and, once it is asked, that none other must). */
  private needsRefresh(list: string, now: number): boolean {
    if (now - this.periodStart >= this.refreshMs || this.refreshed.size >= MAX_REFRESHED) {
      this.refreshed.clear();
      this.periodStart = now;
    }
    if (this.refreshed.has(list)) return false;
    this.refreshed.add(list);
    return true;
  }

  /** The LIST of a key's events. */
  listKey(key: HistoryKey): string {
    return this.keys.tagged(lockId(key.namespace, key.key), historyKindLetter(key.primitive));
  }

  /** The index of the shard a list lives in: the list's prefix and hash tag, kind `H`. */
  indexKey(list: string): string {
    return `${list.slice(0, list.indexOf('}', this.options.keyPrefix.length) + 1)}H`;
  }

  /**
   * A key's list and its shard's index: worked out once, then looked up under the key's text (a string the
   * request made, not a join of the key's parts made per event) in the map of its namespace and primitive.
   * That map is the last key's when the namespace and primitive are the same (two string compares, as the
   * one map by key text did, its names' namespace and primitive compared), and looked up otherwise. One map
   * by key text alone kept the last namespace's (or primitive's) names of a key text: two namespaces
   * writing the same key text in turn worked them out anew on every event.
   */
  private nameOf(key: HistoryKey): ListName {
    const { namespace, primitive } = key;
    let names = this.lastNames;
    if (names === null || namespace !== this.lastNamespace || primitive !== this.lastPrimitive) {
      names = this.namesOf(namespace, primitive);
      this.lastNamespace = namespace;
      this.lastPrimitive = primitive;
      this.lastNames = names;
    }
    const known = names.get(key.key);
    if (known !== undefined) return known;
    if (this.namesHeld >= MAX_NAMES) {
      this.names.clear();
      this.namesHeld = 0;
      // The map in hand left `names` with the rest: one anew, in its place.
      names = this.namesOf(namespace, primitive);
      this.lastNames = names;
    }
    const list = this.listKey(key);
    const name = { list, index: this.indexKey(list) };
    names.set(key.key, name);
    this.namesHeld++;
    return name;
  }

  /** The map of names of a namespace's keys of a primitive, made when there is none. */
  private namesOf(namespace: string, primitive: HistoryPrimitive): KnownNames {
    let byNamespace = this.names.get(primitive);
    if (byNamespace === undefined) this.names.set(primitive, (byNamespace = new Map<string, KnownNames>()));
    let names = byNamespace.get(namespace);
    if (names === undefined) byNamespace.set(namespace, (names = new Map<string, ListName>()));
    return names;
  }

  async append(batch: readonly HistoryAppend[]): Promise<void> {
    // Grouped by list (a grant and its release mostly share a batch), keeping each list's order; then
    // by shard.
    const byKey = new Map<string, KeyEvents>();
    for (const entry of batch) {
      const name = this.nameOf(entry);
      const known = byKey.get(name.list);
      if (known) known.events.push(entry.record);
      else byKey.set(name.list, { name, events: [entry.record] });
    }
    // Per shard's index, its lists with their events (no map by list name: a key's join is its list's).
    const shards = new Map<string, KeyEvents[]>();
    for (const list of byKey.values()) {
      const lists = shards.get(list.name.index);
      if (lists) lists.push(list);
      else shards.set(list.name.index, [list]);
    }
    const { eventsPerKey } = this.options.limits;
    const now = performance.now();
    // Built once connected: a (re)connection forgets the refreshes (see the constructor), so the flags are
    // worked out after it. One array, as the script takes it (ioredis flattens none of it): the key count,
    // the keys, then the arguments; a batch of thousands of events is no spread of as many.
    const argsOf = (group: [string, KeyEvents[]][]): (string | number)[] => {
      let keyCount = 0;
      for (const [, lists] of group) keyCount += 1 + lists.length;
      const args: (string | number)[] = [keyCount];
      for (const [index, lists] of group) {
        args.push(index);
        for (const { name } of lists) args.push(name.list);
      }
      args.push(this.ttlMs, eventsPerKey, this.perShard);
      for (const [index, lists] of group) {
        let flags = this.needsRefresh(index, now) ? '1' : '0';
        for (const { name } of lists) flags += this.needsRefresh(name.list, now) ? '1' : '0';
        args.push(lists.length, flags);
        for (const { events } of lists) {
          // Only a list's last eventsPerKey survive the trim: the rest are neither encoded nor sent (a lease's
          // lock-delay, holder and grant time handed on from them: see carryLeaseFacts).
          const from = Math.max(0, events.length - eventsPerKey);
          if (from > 0) carryLeaseFacts(events, (i) => i >= from);
          let blob = encodeRecord(events[from] as HistoryRecord);
          for (let i = from + 1; i < events.length; i++) blob += `\n${encodeRecord(events[i] as HistoryRecord)}`;
          args.push(blob);
        }
      }
      return args;
    };
    // On a Cluster a group is one shard: its index key names the master.
    const call = (group: [string, KeyEvents[]][]) =>
      this.call(() => this.redis.historyAppend(argsOf(group)), group[0]?.[0]).catch((err: unknown) => {
        // The call may have failed before it set the TTLs it was asked to: none is taken as set.
        this.refreshed.clear();
        throw err;
      });
    // A Cluster refuses a script whose keys span slots: one call per shard there, sent together (each to its
    // node). Elsewhere a call takes shards until it holds LISTS_PER_CALL lists, and the calls go one after
    // another: Redis serves the lock calls of other connections between two of them, so a batch never
    // holds it for long (a whole batch in one script held it some 5 ms at a few thousand pairs/s, and every
    // lock call waited meanwhile).
    if (this.options.connection.mode === 'cluster') {
      await Promise.all([...shards].map((shard) => call([shard])));
      return;
    }
    let group: [string, KeyEvents[]][] = [];
    let held = 0;
    for (const shard of shards) {
      group.push(shard);
      held += shard[1].length;
      if (held >= LISTS_PER_CALL) {
        await call(group);
        group = [];
        held = 0;
      }
    }
    if (group.length > 0) await call(group);
  }

  async read(key: HistoryKey): Promise<HistoryRecord[]> {
    const list = this.listKey(key);
    const raw = await this.call(() => this.redis.lrange(list, 0, -1), list);
    const oldest = Date.now() - this.options.limits.retentionMs;
    return readRecords(raw, oldest, this.options.limits.eventsPerKey);
  }

  async close(): Promise<void> {
    await closeClient(this.redis);
  }

  /**
   * The client queues nothing while it connects (no offline queue, as the lock store's): the first batch
   * after a start or a reconnect waits for the connection, up to a command timeout. On a Cluster that is
   * every master's connection too (readyForCalls): a batch's calls go to their shards' masters together,
   * and a master not yet connected refused all of them but the first.
   */
  private connected(): Promise<void> {
    if (readyForCalls(this.redis)) return Promise.resolve();
    // One wait for every call meanwhile (one set of listeners, not one per call).
    this.connecting ??= whenReadyForCalls(this.redis, this.options.commandTimeoutMs).finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /**
   * Runs one call on `key`'s master. On a Cluster, once every master known is connected (connected), it
   * also waits for `key`'s master's connection if that one is being made anew: a connection that was
   * dropped leaves the client's pool, so readyForCalls no longer sees it, and calls sent together on
   * that master's keys were refused but the first (measured: 19 of 20 appends, 19 of 20 reads).
   */
  private async call<T>(run: () => Promise<T>, key?: string): Promise<T> {
    try {
      await this.connected();
      const waiting = key === undefined ? undefined : this.gate?.(key);
      if (waiting !== undefined) await waiting;
      return await run();
    } catch (err) {
      throw new StoreUnavailableError(`Redis history call failed: ${(err as Error).message}`, 1000, { cause: err });
    }
  }
}
