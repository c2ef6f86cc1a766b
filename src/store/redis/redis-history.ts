import { encodeRecord, readRecords } from '../../domain/history.js';
import type { HistoryAppend, HistoryKey, HistoryLimits, HistoryRecord, HistoryStore } from '../../domain/history.js';
import { lockId } from '../../domain/namespaces.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import { createRedisClient, type RedisClient, type RedisConnection } from './client.js';
import { historyKindLetter, type HistoryKeys, KeySpace, QUOTA_SHARDS } from './keys.js';
import { readyForCalls, whenReadyForCalls } from './nodes.js';
import { loadScript } from './scripts.js';

/** The append script (see its header): per shard its hash and index, their TTLs set on creation or on request. */
const APPEND_LUA = loadScript('history-append.lua');

/**
 * A shard's hash and index have their TTL refreshed once per this share of the retention, not on every
 * write, and the same call drops the shard's keys idle for the retention. The TTL sent is the retention
 * plus two of these, so a shard written without a refresh, at most one period after its last one, still
 * outlives that write by the retention (the second period covers a call that waited in the client's
 * queue); a key idle for the retention is then dropped at most 2/32 of it later (by the next refresh of
 * its shard, or with the whole shard).
 */
const REFRESHES_PER_RETENTION = 32;
/** Shards remembered as refreshed at most: past it the period starts over (more refreshes, never fewer). */
const MAX_REFRESHED = 50_000;

type HistoryClient = RedisClient & {
  historyAppend(args: (string | number)[]): Promise<unknown>;
};

/** Keys per script call, off a Cluster (see append). */
const KEYS_PER_CALL = 64;

/** A shard's part of a batch: its hash and index, and per key its field and events. */
interface Shard {
  readonly index: string;
  readonly data: string;
  readonly fields: string[];
  readonly events: HistoryRecord[][];
}

export interface RedisHistoryOptions {
  readonly connection: RedisConnection;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly limits: HistoryLimits;
}

/**
 * Lease history on Redis: per quota shard (the same hash tag as its locks, so history spreads over a
 * Cluster's masters as the locks do) one HASH of its keys' histories (a field a key, its capped events
 * one a line) and one index. Its own connection: a batch is a few script calls (on a Cluster one per
 * shard, sent together), and it never queues behind (or ahead of) the lock scripts. The per-namespace
 * cap is counted per shard: keysPerNamespace / 16, rounded up, each. The layout before (a LIST per key,
 * in the same index) is read along until its TTL has dropped it, and deleted when its index entry goes.
 */
export class RedisHistory implements HistoryStore {
  private readonly redis: HistoryClient;
  private readonly keys: KeySpace;
  private readonly perShard: number;
  private connecting: Promise<void> | null = null;
  /** How long a refresh holds (ms), and the TTL a refresh sets (ms): see REFRESHES_PER_RETENTION. */
  private readonly refreshMs: number;
  private readonly ttlMs: number;
  /** The shards (by index) whose TTLs a call of this period set (or asked for): no refresh until it ends. */
  private refreshed = new Set<string>();
  private periodStart = 0;

  constructor(private readonly options: RedisHistoryOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.perShard = Math.max(1, Math.ceil(options.limits.keysPerNamespace / QUOTA_SHARDS));
    // No auto-pipelining: a batch is one call (on a Cluster, one per shard, each sent to its node at
    // once anyway), and ioredis' auto-pipelining files a script by its first argument (the key count,
    // not a key) on a Cluster, so it put shards of other nodes in one pipeline, which the Cluster refused.
    const redis = createRedisClient(options.connection, { commandTimeoutMs: options.commandTimeoutMs, autoPipelining: false });
    redis.defineCommand('historyAppend', { lua: APPEND_LUA });
    this.redis = redis as HistoryClient;
    this.refreshMs = Math.max(1, Math.floor(options.limits.retentionMs / REFRESHES_PER_RETENTION));
    this.ttlMs = options.limits.retentionMs + 2 * this.refreshMs;
    // A new connection may be to a new master (a failover) that lost the last refreshes: all over again.
    redis.on('ready', () => this.refreshed.clear());
  }

  /** Whether a call of this period must set the shard's TTLs (and, once it is asked, that none other must). */
  private needsRefresh(index: string, now: number): boolean {
    if (now - this.periodStart >= this.refreshMs || this.refreshed.size >= MAX_REFRESHED) {
      this.refreshed.clear();
      this.periodStart = now;
    }
    if (this.refreshed.has(index)) return false;
    this.refreshed.add(index);
    return true;
  }

  /** Where a key's history lives: its shard's hash and index, its field there, and its list of the layout before. */
  historyKeys(key: HistoryKey): HistoryKeys {
    return this.keys.history(lockId(key.namespace, key.key), historyKindLetter(key.primitive));
  }

  async append(batch: readonly HistoryAppend[]): Promise<void> {
    // Grouped by key (a grant and its release mostly share a batch), keeping each key's order, and by
    // shard as each key is first seen: its names (a CRC16 and more) are worked out once per key.
    const byKey = new Map<string, HistoryRecord[]>();
    const shards = new Map<string, Shard>();
    for (const entry of batch) {
      // A plain join to group by.
      const id = `${entry.primitive}\n${entry.namespace}\n${entry.key}`;
      const known = byKey.get(id);
      if (known) {
        known.push(entry.record);
        continue;
      }
      const events = [entry.record];
      byKey.set(id, events);
      const { tag, field } = this.keys.historyPlace(lockId(entry.namespace, entry.key), historyKindLetter(entry.primitive));
      const shard = shards.get(tag);
      if (shard) {
        shard.fields.push(field);
        shard.events.push(events);
      } else shards.set(tag, { ...this.keys.historyShard(tag), fields: [field], events: [events] });
    }
    const { eventsPerKey, retentionMs } = this.options.limits;
    const now = performance.now();
    // Built once connected: a (re)connection forgets the refreshes (see the constructor), so the flags are
    // worked out after it. One flat array (ioredis sends it as the command's arguments).
    const argsOf = (group: Shard[]): (string | number)[] => {
      const args: (string | number)[] = [group.length * 2];
      for (const shard of group) args.push(shard.index, shard.data);
      args.push(this.ttlMs, eventsPerKey, this.perShard, retentionMs);
      for (const shard of group) {
        args.push(shard.fields.length, this.needsRefresh(shard.index, now) ? '1' : '0');
        for (let j = 0; j < shard.fields.length; j++) {
          const events = shard.events[j] as HistoryRecord[];
          // Only a key's last eventsPerKey survive the trim: the rest are neither encoded nor sent.
          const from = Math.max(0, events.length - eventsPerKey);
          let blob = encodeRecord(events[from] as HistoryRecord);
          for (let i = from + 1; i < events.length; i++) blob += `\n${encodeRecord(events[i] as HistoryRecord)}`;
          args.push(shard.fields[j] as string, blob);
        }
      }
      return args;
    };
    const call = (group: Shard[]) =>
      this.call(() => this.redis.historyAppend(argsOf(group))).catch((err: unknown) => {
        // The call may have failed before it set the TTLs it was asked to: none is taken as set.
        this.refreshed.clear();
        throw err;
      });
    // A Cluster refuses a script whose keys span slots: one call per shard there, sent together (each to its
    // node). Elsewhere a call takes shards until it holds KEYS_PER_CALL keys, and the calls go one after
    // another: Redis serves the lock calls of other connections between two of them, so a batch never
    // holds it for long (a whole batch in one script held it some 5 ms at a few thousand pairs/s, and every
    // lock call waited meanwhile).
    if (this.options.connection.mode === 'cluster') {
      await Promise.all([...shards.values()].map((shard) => call([shard])));
      return;
    }
    let group: Shard[] = [];
    let held = 0;
    for (const shard of shards.values()) {
      group.push(shard);
      held += shard.fields.length;
      if (held >= KEYS_PER_CALL) {
        await call(group);
        group = [];
        held = 0;
      }
    }
    if (group.length > 0) await call(group);
  }

  async read(key: HistoryKey): Promise<HistoryRecord[]> {
    const { data, field, list } = this.historyKeys(key);
    // The key's list of the layout before (until its TTL drops it: older events) and its field. One slot.
    const [older, blob] = await this.call(async () => {
      const replies = (await this.redis.pipeline().lrange(list, 0, -1).hget(data, field).exec()) ?? [];
      for (const [err] of replies) if (err) throw err;
      return [replies[0]?.[1] as string[], replies[1]?.[1] as string | null];
    });
    // A field's value: its count of lines first (see the script), then its events.
    const events = blob === null ? [] : blob.slice(blob.indexOf('\n') + 1).split('\n');
    const lines = older.length === 0 ? events : [...older, ...events];
    const oldest = Date.now() - this.options.limits.retentionMs;
    return readRecords(lines, oldest, this.options.limits.eventsPerKey);
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
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

  private async call<T>(run: () => Promise<T>): Promise<T> {
    try {
      await this.connected();
      return await run();
    } catch (err) {
      throw new StoreUnavailableError(`Redis history call failed: ${(err as Error).message}`, 1000, { cause: err });
    }
  }
}
