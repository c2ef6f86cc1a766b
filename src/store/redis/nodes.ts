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
 * Whether calls sent now, several at once, reach their nodes: the client is ready and, on a Cluster, so
 * is its connection to every master. A Cluster client without an offline queue sends the first command
 * for a master whose connection is not made yet (that command starts it), but refuses every other one
 * until that connection is ready, with "Connection is closed." although nothing was closed: of calls
 * sent together to a master not yet connected (right after a start, or once a node's connection was
 * made anew), all but one fail without reaching Redis.
 */
export function readyForCalls(client: RedisClient): boolean {
  if (client.status !== 'ready') return false;
  return !(client instanceof Cluster) || client.nodes('master').every((node) => node.status === 'ready');
}

/**
 * Resolves once readyForCalls(client), making the Cluster's master connections not yet started (a
 * Cluster client makes them lazily, on a first command); rejects after `timeoutMs`. Nothing is sent
 * before it resolves, so a caller that gives up has sent nothing.
 */
export function whenReadyForCalls(client: RedisClient, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const listened = new Set<Redis | Cluster>();
    const check = (): void => {
      if (readyForCalls(client)) {
        finish();
        resolve();
        return;
      }
      if (!(client instanceof Cluster) || client.status !== 'ready') return;
      for (const node of client.nodes('master')) {
        // Its failure (a node that is down) is the node's 'error' event's to tell, and the timer's.
        if (node.status === 'wait') node.connect().catch(() => undefined);
        listen(node);
      }
    };
    const listen = (emitter: Redis | Cluster): void => {
      if (listened.has(emitter)) return;
      listened.add(emitter);
      emitter.on('ready', check);
    };
    const finish = (): void => {
      clearTimeout(timer);
      for (const emitter of listened) emitter.off('ready', check);
      client.off('refresh', check);
      client.off('-node', check);
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`not connected (${connectionStates(client)})`));
    }, timeoutMs);
    listen(client);
    // A Cluster's masters change with its slot map (a failover): a master gone may leave the rest ready.
    client.on('refresh', check);
    client.on('-node', check);
    check();
  });
}

/** The client's state, and on a Cluster each master connection's: what a timed-out wait reports. */
function connectionStates(client: RedisClient): string {
  if (!(client instanceof Cluster) || client.status !== 'ready') return client.status;
  return client
    .nodes('master')
    .map((n) => `${n.options.host ?? ''}:${String(n.options.port ?? '')} ${n.status}`)
    .join(', ');
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
