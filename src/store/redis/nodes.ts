import { Cluster, Command, type Redis } from 'ioredis';
import { randomBase64url } from '../../domain/random.js';
import type { RedisClient } from './client.js';
import { sendWithin } from './command-deadline.js';
import { MisalignedReplyError } from './replies.js';

/**
 * What differs between one Redis and a Redis Cluster for the store, in one place: which node a command
 * without keys (WAIT, SCAN, PING) must go to, and how the hand-over subscriber is made. The scripts
 * themselves need nothing here: each names all its keys, all tagged by one namespace (keys.ts), so a
 * Cluster client sends each to the one master that owns that slot.
 */

/** The master serving `key`'s slot as the client's slot map has it ("host:port"), or null if unknown. */
function slotOwner(cluster: Cluster, key: string): string | null {
  const slot = new Command('exists', [key]).getSlot();
  return cluster.slots[slot]?.[0] ?? null;
}

function nodeByKey(cluster: Cluster, nodeKey: string): Redis | undefined {
  return cluster.nodes('master').find((n) => `${n.options.host ?? ''}:${n.options.port ?? ''}` === nodeKey);
}

/**
 * WAIT on the connection that ran the last script on `key`: the replicas confirming every write made so
 * far on it. WAIT counts per connection, so on a Cluster it must go to the node that ran the script:
 * the master of `key`'s slot. `ownerBefore` is that master as the slot map named it before the script
 * ran (ownerOf); if the map names another one now (a failover or a slot move in between), the script
 * may have run elsewhere and 0 is reported: the caller rolls back and answers 503 rather than trust a
 * count taken on the wrong node.
 */
export async function confirmOnReplicas(
  client: RedisClient,
  key: string,
  ownerBefore: string | null,
  minReplicas: number,
  timeoutMs: number,
): Promise<number> {
  if (!(client instanceof Cluster)) return client.wait(minReplicas, timeoutMs);
  const owner = slotOwner(client, key);
  const node = owner === null || owner !== ownerBefore ? undefined : nodeByKey(client, owner);
  if (node === undefined) return 0;
  return node.wait(minReplicas, timeoutMs);
}

/** The node key that owns `key`'s slot now; compared before and after a script (see confirmOnReplicas). */
export function ownerOf(client: RedisClient, key: string): string | null {
  return client instanceof Cluster ? slotOwner(client, key) : 'single';
}

/** The nodes holding data: the one Redis, or every Cluster master (sorted, so a listing cursor is stable). */
export function dataNodes(client: RedisClient): Redis[] {
  if (!(client instanceof Cluster)) return [client];
  const key = (n: Redis) => `${n.options.host ?? ''}:${String(n.options.port ?? '')}`;
  return client.nodes('master').sort((a, b) => key(a).localeCompare(key(b)));
}

/**
 * PING with a message echoes it: a reply meant for another call cannot pass for this one. With
 * `timeoutMs`, under that deadline instead of the client's command timeout (see sendWithin).
 */
export async function echoPingOn(node: Redis, timeoutMs?: number): Promise<void> {
  const nonce = randomBase64url(12);
  const reply =
    timeoutMs === undefined
      ? await node.ping(nonce)
      : await sendWithin<string>(node, new Command('ping', [nonce], { replyEncoding: 'utf8' }), timeoutMs);
  if (reply !== nonce) throw new MisalignedReplyError('ping');
}

/**
 * Drops a connection whose replies may be out of step; the client reconnects. On a Cluster only the
 * one node's connection goes (the client opens a new one on the next command for its slots); without
 * a node named, or on one Redis, the whole client reconnects.
 */
export function dropConnection(client: RedisClient, node?: Redis): void {
  if (client instanceof Cluster && node !== undefined) node.disconnect();
  else client.disconnect(true);
}

/**
 * The hand-over subscriber: a second connection that may queue its SUBSCRIBE until connected and
 * re-subscribes after a reconnect (see RedisStore). On a Cluster, PUBLISH (also from a script) reaches
 * every node, so the subscriber listens on any one node; ioredis moves it to another if that one fails.
 */
export function subscriberFor(client: RedisClient): RedisClient {
  if (client instanceof Cluster) {
    return client.duplicate([], {
      enableOfflineQueue: true,
      enableAutoPipelining: false,
      redisOptions: { ...client.options.redisOptions, commandTimeout: undefined, maxRetriesPerRequest: null },
    });
  }
  return client.duplicate({ enableOfflineQueue: true, enableAutoPipelining: false, commandTimeout: undefined, maxRetriesPerRequest: null });
}
