import { encodeRecord, readRecords } from '../../domain/history.js';
import type { HistoryAppend, HistoryKey, HistoryLimits, HistoryRecord, HistoryStore } from '../../domain/history.js';
import { lockId } from '../../domain/namespaces.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import { createRedisClient, type RedisClient, type RedisConnection } from './client.js';
import { historyKindLetter, KeySpace, QUOTA_SHARDS } from './keys.js';
import { readyForCalls, whenReadyForCalls } from './nodes.js';

/**
 * One atomic step for the shards of a batch (KEYS: per shard its index, then its lists; ARGV: retention,
 * events per key, keys per shard, then per shard its count of lists, and per list its events joined by
 * line breaks, oldest first: one argument a list, not one an event, which is what a batch costs the
 * instance to send). No stored event holds a raw line break (encodeRecord escapes it in text; JSON
 * escapes it in strings). Each list keeps its last events and lives `retention` past its last write
 * (its TTL); each index (a ZSET of list names by last write, on Redis's clock) deletes the least recently
 * written past the shard's cap. An index entry of a list its TTL dropped stays until it is the oldest past
 * the cap (it is: it was written before any live list), so the index never outgrows the cap and needs no
 * sweep of its own. Every key of a shard carries the shard's hash tag: on a Cluster a call holds one shard
 * (one slot); elsewhere one call holds several.
 */
const APPEND_LUA = `
local perKey, perShard = tonumber(ARGV[2]), tonumber(ARGV[3])
-- The TTL as sent, a string: a number passed to redis.call is formatted anew on every call.
local a, k, ttl = 4, 1, ARGV[1]
-- Ranks from Redis's clock, read once a call (not the top of each index, one call per shard): they go up
-- from call to call, whichever instance sent it, as each list takes the script longer than the 1 µs its
-- rank adds.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
while k <= #KEYS do
  local index, lists = KEYS[k], tonumber(ARGV[a])
  a = a + 1
  local score = now
  -- The index's new scores, sent in one ZADD per 500 lists (not one per list).
  local ranks, r = {}, 0
  for i = k + 1, k + lists do
    local blob, len = ARGV[a], 0
    local nl = string.find(blob, '\\n', 1, true)
    if not nl then
      -- One event (the common case: a pair folded into its grant): pushed as sent, no split, no table.
      len = redis.call('RPUSH', KEYS[i], blob)
    else
      local from, n, events = 1, 0, {}
      while true do
        n = n + 1
        if not nl then events[n] = string.sub(blob, from); break end
        events[n] = string.sub(blob, from, nl - 1)
        from = nl + 1
        nl = string.find(blob, '\\n', from, true)
      end
      -- At most 1000 events per RPUSH: unpack's limit (some 8000) is never reached, whatever eventsPerKey is.
      for first = 1, n, 1000 do len = redis.call('RPUSH', KEYS[i], unpack(events, first, math.min(first + 999, n))) end
    end
    -- A trim only when the list outgrew its cap: RPUSH answers the length.
    if len > perKey then redis.call('LTRIM', KEYS[i], -perKey, -1) end
    a = a + 1
    redis.call('PEXPIRE', KEYS[i], ttl)
    ranks[r + 1], ranks[r + 2], r = score, KEYS[i], r + 2
    score = score + 0.001
    if r >= 1000 then redis.call('ZADD', index, unpack(ranks, 1, r)); r = 0 end
  end
  if r > 0 then redis.call('ZADD', index, unpack(ranks, 1, r)) end
  local over = redis.call('ZCARD', index) - perShard
  -- Past the cap: the least recently written lists leave the index (one ZPOPMIN) and go (one DEL per 1000).
  while over > 0 do
    local popped = redis.call('ZPOPMIN', index, math.min(over, 1000))
    local victims = {}
    for j = 1, #popped, 2 do victims[#victims + 1] = popped[j] end
    redis.call('DEL', unpack(victims))
    over = over - #victims
  end
  redis.call('PEXPIRE', index, ttl)
  k = k + lists + 1
end
return 1
`;

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

  constructor(private readonly options: RedisHistoryOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.perShard = Math.max(1, Math.ceil(options.limits.keysPerNamespace / QUOTA_SHARDS));
    // No auto-pipelining: a batch is one call (on a Cluster, one per shard, each sent to its node at
    // once anyway), and ioredis' auto-pipelining files a script by its first argument (the key count,
    // not a key) on a Cluster, so it put shards of other nodes in one pipeline, which the Cluster refused.
    const redis = createRedisClient(options.connection, { commandTimeoutMs: options.commandTimeoutMs, autoPipelining: false });
    redis.defineCommand('historyAppend', { lua: APPEND_LUA });
    this.redis = redis as HistoryClient;
  }

  /** The LIST of a key's events. */
  listKey(key: HistoryKey): string {
    return this.keys.tagged(lockId(key.namespace, key.key), historyKindLetter(key.primitive));
  }

  /** The index of the shard a list lives in: the list's prefix and hash tag, kind `H`. */
  indexKey(list: string): string {
    return `${list.slice(0, list.indexOf('}', this.options.keyPrefix.length) + 1)}H`;
  }

  async append(batch: readonly HistoryAppend[]): Promise<void> {
    // Grouped by list (a grant and its release mostly share a batch), keeping each list's order; then
    // by shard. The names are worked out once per list, not per event.
    const byKey = new Map<string, { key: HistoryKey; events: HistoryRecord[] }>();
    for (const entry of batch) {
      // A plain join to group by (the list's name costs a CRC16 and more: worked out once per key below).
      const id = `${entry.primitive}\n${entry.namespace}\n${entry.key}`;
      const known = byKey.get(id);
      if (known) known.events.push(entry.record);
      else byKey.set(id, { key: entry, events: [entry.record] });
    }
    const lists = new Map<string, HistoryRecord[]>();
    for (const { key, events } of byKey.values()) lists.set(this.listKey(key), events);
    const shards = new Map<string, string[]>();
    for (const list of lists.keys()) {
      const index = this.indexKey(list);
      const names = shards.get(index);
      if (names) names.push(list);
      else shards.set(index, [list]);
    }
    const { retentionMs, eventsPerKey } = this.options.limits;
    const head = [retentionMs, eventsPerKey, this.perShard];
    const call = (group: [string, string[]][]) => {
      const keys: string[] = [];
      const args: (string | number)[] = [...head];
      for (const [index, names] of group) {
        keys.push(index);
        for (const name of names) keys.push(name);
        args.push(names.length);
        for (const name of names) {
          const events = lists.get(name) as HistoryRecord[];
          // Only a list's last eventsPerKey survive the trim: the rest are neither encoded nor sent.
          const from = Math.max(0, events.length - eventsPerKey);
          let blob = encodeRecord(events[from] as HistoryRecord);
          for (let i = from + 1; i < events.length; i++) blob += `\n${encodeRecord(events[i] as HistoryRecord)}`;
          args.push(blob);
        }
      }
      // One array argument (ioredis flattens it): a batch of thousands of events is no spread of as many.
      return this.call(() => this.redis.historyAppend([keys.length, ...keys, ...args]));
    };
    // A Cluster refuses a script whose keys span slots: one call per shard there, sent together (each to its
    // node). Elsewhere a call takes shards until it holds LISTS_PER_CALL lists, and the calls go one after
    // another: Redis serves the lock calls of other connections between two of them, so a batch never
    // holds it for long (a whole batch in one script held it some 5 ms at a few thousand pairs/s, and every
    // lock call waited meanwhile).
    if (this.options.connection.mode === 'cluster') {
      await Promise.all([...shards].map((shard) => call([shard])));
      return;
    }
    let group: [string, string[]][] = [];
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
    const raw = await this.call(() => this.redis.lrange(this.listKey(key), 0, -1));
    const oldest = Date.now() - this.options.limits.retentionMs;
    return readRecords(raw, oldest, this.options.limits.eventsPerKey);
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
