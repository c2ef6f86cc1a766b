import {
  decodeRecord,
  encodeRecord,
  type HistoryAppend,
  type HistoryKey,
  type HistoryLimits,
  type HistoryPrimitive,
  type HistoryRecord,
  type HistoryStore,
} from '../../domain/history.js';
import { lockId } from '../../domain/namespaces.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import { createRedisClient, type RedisClient, type RedisConnection } from './client.js';
import { KeySpace, QUOTA_SHARDS } from './keys.js';

/**
 * One atomic step per quota shard of a batch (KEYS[1]: the shard's index; KEYS[2..]: the keys' lists;
 * ARGV: now, retention, events per key, keys per shard, then per list its count of events and the
 * events). Each list keeps its last events and lives `retention` past its last write; the index (a
 * ZSET of list names by last write) drops the lists idle past the retention, and past the shard's cap
 * deletes the least recently written. Every key it touches carries the shard's hash tag, so on a
 * Cluster the step runs on one node (the evicted lists are named by the index, in the same slot).
 */
const APPEND_LUA = `
local now, keep, perKey, perShard = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- Scores only go up, so the list written last is ranked last even within one millisecond.
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
local score = now
if top and tonumber(top) >= score then score = tonumber(top) + 0.001 end
local a = 5
-- The index's new scores, sent in one ZADD per 500 lists (not one per list; unpack's limit is far above).
local ranks, r = {}, 0
for i = 2, #KEYS do
  local n = tonumber(ARGV[a])
  -- A trim only when the list outgrew its cap: RPUSH answers the length.
  if redis.call('RPUSH', KEYS[i], unpack(ARGV, a + 1, a + n)) > perKey then redis.call('LTRIM', KEYS[i], -perKey, -1) end
  a = a + n + 1
  redis.call('PEXPIRE', KEYS[i], keep)
  ranks[r + 1], ranks[r + 2], r = score, KEYS[i], r + 2
  score = score + 0.001
  if r >= 1000 then redis.call('ZADD', KEYS[1], unpack(ranks, 1, r)); r = 0 end
end
if r > 0 then redis.call('ZADD', KEYS[1], unpack(ranks, 1, r)) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - keep)
local over = redis.call('ZCARD', KEYS[1]) - perShard
if over > 0 then
  local victims = redis.call('ZRANGE', KEYS[1], 0, over - 1)
  for _, v in ipairs(victims) do redis.call('DEL', v) end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
end
redis.call('PEXPIRE', KEYS[1], keep)
return 1
`;

const PRIMITIVE_LETTER: Record<HistoryPrimitive, string> = { lock: 'hl', semaphore: 'hs', rwlock: 'hr' };

type HistoryClient = RedisClient & {
  historyAppend(...args: (string | number)[]): Promise<unknown>;
};

export interface RedisHistoryOptions {
  readonly connection: RedisConnection;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly limits: HistoryLimits;
}

/**
 * Lease history on Redis: a capped LIST per key, in the key's own quota shard (the same hash tag as its
 * lock, so history spreads over a Cluster's masters as the locks do), and one index per shard. Its own
 * connection with auto-pipelining: a batch is one round trip per node, and it never queues behind (or
 * ahead of) the lock scripts. The per-namespace cap is counted per shard: keysPerNamespace / 16,
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
    const redis = createRedisClient(options.connection, { commandTimeoutMs: options.commandTimeoutMs, autoPipelining: true });
    redis.defineCommand('historyAppend', { lua: APPEND_LUA });
    this.redis = redis as HistoryClient;
  }

  /** The LIST of a key's events. */
  listKey(key: HistoryKey): string {
    return this.keys.tagged(lockId(key.namespace, key.key), PRIMITIVE_LETTER[key.primitive]);
  }

  /** The index of the shard a list lives in: the list's prefix and hash tag, kind `H`. */
  indexKey(list: string): string {
    return `${list.slice(0, list.indexOf('}', this.options.keyPrefix.length) + 1)}H`;
  }

  async append(batch: readonly HistoryAppend[]): Promise<void> {
    // Grouped by shard, then by list, keeping each list's order.
    const shards = new Map<string, Map<string, HistoryRecord[]>>();
    for (const { record, ...key } of batch) {
      const list = this.listKey(key);
      const index = this.indexKey(list);
      let lists = shards.get(index);
      if (!lists) {
        lists = new Map();
        shards.set(index, lists);
      }
      let events = lists.get(list);
      if (!events) {
        events = [];
        lists.set(list, events);
      }
      events.push(record);
    }
    const { retentionMs, eventsPerKey } = this.options.limits;
    const now = Date.now();
    await Promise.all(
      [...shards].map(([index, lists]) => {
        const names = [...lists.keys()];
        const args: (string | number)[] = [names.length + 1, index, ...names, now, retentionMs, eventsPerKey, this.perShard];
        for (const events of lists.values()) {
          // Only a list's last eventsPerKey survive the trim: the rest are neither encoded nor sent (and a
          // hot key's batch stays far below what one Lua unpack takes).
          const kept = events.length > eventsPerKey ? events.slice(-eventsPerKey) : events;
          args.push(kept.length);
          for (const record of kept) args.push(encodeRecord(record));
        }
        return this.call(() => this.redis.historyAppend(...args));
      }),
    );
  }

  async read(key: HistoryKey): Promise<HistoryRecord[]> {
    const raw = await this.call(() => this.redis.lrange(this.listKey(key), 0, -1));
    const oldest = Date.now() - this.options.limits.retentionMs;
    return raw.map(decodeRecord).filter((r): r is HistoryRecord => r !== null && r.at >= oldest);
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
   * after a start or a reconnect waits for the connection, up to a command timeout.
   */
  private connected(): Promise<void> {
    if (this.redis.status === 'ready') return Promise.resolve();
    // One wait for every call meanwhile (one listener, not one per call).
    this.connecting ??= new Promise<void>((resolve, reject) => {
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.redis.off('ready', onReady);
        reject(new Error(`not connected (${this.redis.status})`));
      }, this.options.commandTimeoutMs);
      this.redis.once('ready', onReady);
    }).finally(() => {
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
