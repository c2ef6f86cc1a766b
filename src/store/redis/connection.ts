import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisConnection } from '../../config.js';

/**
 * The one place a Redis client is made from the configured topology, so the lock store and the rate
 * limiter reach the same Redis the same way.
 *
 * - standalone: one server by URL.
 * - sentinel: the client asks the sentinels for the current primary and asks again whenever the
 *   connection drops or a sentinel announces a switch (failoverDetector), so a failover is followed
 *   without a restart.
 * - cluster: see createRedisCluster.
 */
export function createRedisClient(connection: Exclude<RedisConnection, { mode: 'cluster' }>, options: RedisOptions): Redis {
  if (connection.mode === 'standalone') return new Redis(connection.url, options);
  return new Redis({
    ...options,
    sentinels: connection.sentinels.map(({ host, port }) => ({ host, port })),
    name: connection.name,
    role: 'master',
    // Subscribes to +switch-master on a sentinel: the client moves to a new primary when it is
    // announced, instead of only when the old connection breaks (a demoted, still-running primary
    // would otherwise keep answering READONLY).
    failoverDetector: true,
    // Ask the sentinels again every 100 ms, at most every second: a failover takes seconds.
    sentinelRetryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    sentinelCommandTimeout: options.commandTimeout ?? 1000,
    // A primary demoted under the client answers writes with READONLY: reconnect (which asks the
    // sentinels where the primary is now) without re-sending the command; the caller gets its 503.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 1 : false),
  });
}

/**
 * A Redis Cluster client. Commands are routed by slot; every script keyholder runs touches keys of one
 * hash tag, so one node answers it. MOVED/ASK redirections are followed; during a failover or a
 * reshard the command fails (no offline queue, no retries) and the caller gets a 503.
 */
export function createRedisCluster(
  connection: Extract<RedisConnection, { mode: 'cluster' }>,
  options: RedisOptions,
  clusterOptions: ClusterOptions = {},
): Cluster {
  return new Cluster(
    connection.nodes.map(({ host, port }) => ({ host, port })),
    {
      ...clusterOptions,
      redisOptions: options,
      enableOfflineQueue: false,
      enableAutoPipelining: options.enableAutoPipelining ?? false,
      scaleReads: 'master',
      // Slot moves are followed at once; a slot served by no node yet is asked again a little later.
      retryDelayOnMoved: 0,
      retryDelayOnClusterDown: 100,
      retryDelayOnFailover: 100,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    },
  );
}
