import { Cluster, Command, type Redis } from 'ioredis';
import { randomBase64url } from '../../domain/random.js';
import type { RedisClient } from './client.js';
import { sendWithin } from './command-deadline.js';
import { MisalignedReplyError } from './replies.js';
import { slotOf } from './slot.js';

/**
 * What differs between one Redis and a Redis Cluster for the store, in one place: which node a command
 * without keys (WAIT, SCAN, PING) must go to, and how the hand-over subscriber is made. The scripts
 * themselves need nothing here: each names all its keys, all tagged by one namespace (keys.ts), so a
 * Cluster client sends each to the one master that owns that slot.
 */

/** The master serving `key`'s slot as the client's slot map has it ("host:port"), or null if unknown. */
function slotOwner(cluster: Cluster, key: string): string | null {
  return cluster.slots[slotOf(key)]?.[0] ?? null;
}

/** A node's key as the slot map names it ("host:port"). */
function nodeKeyOf(node: Redis): string {
  return `${node.options.host ?? ''}:${String(node.options.port ?? '')}`;
}

/** The pool's connection to the master `nodeKey` ("host:port"), if it has one. */
function nodeByKey(cluster: Cluster, nodeKey: string): Redis | undefined {
  return cluster.nodes('master').find((n) => nodeKeyOf(n) === nodeKey);
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
  return client.nodes('master').sort((a, b) => nodeKeyOf(a).localeCompare(nodeKeyOf(b)));
}

/**
 * The nodes a listing walks (dataNodes), once the pool has a ready connection to every master the slot
 * map names: a master's connection that was dropped leaves the pool until it is made anew, and a
 * listing over the pool alone came back complete without that master's keys (measured: 23 of 48
 * locks). Waits for such a connection up to `timeoutMs` (whenMasterReady), then rejects if one is
 * still missing: a listing that cannot reach every master fails rather than come back short.
 */
export async function everyMasterNode(client: RedisClient, timeoutMs: number): Promise<Redis[]> {
  if (!(client instanceof Cluster)) return [client];
  /** Each master the slot map names, with one slot it serves. */
  const slotOfMaster = new Map<string, number>();
  client.slots.forEach((owners, slot) => {
    const owner = owners[0];
    if (owner !== undefined && !slotOfMaster.has(owner)) slotOfMaster.set(owner, slot);
  });
  await Promise.all([...slotOfMaster.values()].map((slot) => whenMasterReady(client, slot, timeoutMs, () => undefined)));
  const nodes = dataNodes(client);
  const pooled = new Set(nodes.map(nodeKeyOf));
  for (const owner of slotOfMaster.keys()) if (!pooled.has(owner)) throw new Error(`no connection to the master ${owner}`);
  return nodes;
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
 * Cluster client makes them lazily, on a first command); rejects after `timeoutMs`, or at once when the
 * client is closed (ended): it will never be ready, and a wait of a command timeout kept its timer, so
 * the process, alive after the close. Nothing is sent before it resolves, so a caller that gives up has
 * sent nothing.
 */
export function whenReadyForCalls(client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'end') return Promise.reject(new Error('not connected (closed)'));
  return new Promise<void>((resolve, reject) => {
    const listened = new Set<Redis | Cluster>();
    const ended = (): void => {
      finish();
      reject(new Error('not connected (closed)'));
    };
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
      client.off('end', ended);
      client.off('refresh', check);
      client.off('-node', check);
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`not connected (${connectionStates(client)})`));
    }, timeoutMs);
    listen(client);
    client.on('end', ended);
    // A Cluster's masters change with its slot map (a failover): a master gone may leave the rest ready.
    client.on('refresh', check);
    client.on('-node', check);
    check();
  });
}

/**
 * Before a call on `key`: nothing to wait for (undefined), or a wait for the connection to the master
 * serving its slot, which resolves once it is ready and rejects after `timeoutMs` (nothing is sent
 * then, so a call that gives up has done nothing). Null on one Redis: its client's status says it all.
 */
export type MasterGate = (key: string) => Promise<void> | undefined;

/**
 * The MasterGate of a Cluster client. Its connection to a master, once lost (the master closed it, a
 * proxy reaped it, a network blip), is dropped from the client's pool, while the slot map still names
 * that master until it is read again (within a second): a call sent meanwhile goes to another master
 * and comes back MOVED, and calls sent together on one connection (auto-pipelining) are not redirected
 * but fail. Once the map is read again the connection is made anew on the next command, and until it
 * is ready every call but that first one is refused with "Connection is closed." (no offline queue).
 * Either way a healthy master's keys were answered 503 for up to a second, and every call sent at once
 * failed. Here a call whose master's connection is not ready first waits for it, up to `timeoutMs`
 * (the command timeout): the slot map is read again, the connection made, and the call then sent on a
 * ready connection. A master really gone still answers 503, after the wait; calls on other masters
 * never wait for it, nor does any call while the client itself is not ready (it fails at once). The
 * check costs a slot hash and a map look-up per call while connections are ready.
 */
export function masterGate(client: RedisClient, timeoutMs: number): MasterGate | null {
  if (!(client instanceof Cluster)) return null;
  /** Master connections by node key, as last seen ready (a cache: the pool is what counts). */
  const ready = new Map<string, Redis>();
  return (key) => {
    // The whole client down (or not yet up): nothing to wait for here, the call fails at once as before.
    if (client.status !== 'ready') return undefined;
    const slot = slotOf(key);
    const owner = client.slots[slot]?.[0];
    if (owner !== undefined && ready.get(owner)?.status === 'ready') return undefined;
    return whenMasterReady(client, slot, timeoutMs, (nodeKey, node) => ready.set(nodeKey, node));
  };
}

/** See masterGate: resolves once the master of `slot` (by the slot map of that moment) has a ready connection. */
function whenMasterReady(cluster: Cluster, slot: number, timeoutMs: number, seen: (nodeKey: string, node: Redis) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const listened = new Set<Redis>();
    let owner: string | undefined;
    let state = 'no master known for the slot';
    const check = (): void => {
      owner = cluster.slots[slot]?.[0];
      const node = owner === undefined ? undefined : nodeByKey(cluster, owner);
      if (owner !== undefined && node?.status === 'ready') {
        seen(owner, node);
        finish();
        resolve();
        return;
      }
      if (node === undefined) {
        // Not in the pool (its connection ended): the slot map is read again, which makes it anew
        // ('+node'), or names the slot's new master ('refresh'). One refresh at a time (ioredis).
        state = `${owner ?? 'no master'} not connected`;
        cluster.refreshSlotsCache();
        return;
      }
      state = `${owner ?? ''} ${node.status}`;
      // A connection made lazily: its first command would start it; nothing is sent here, so start it.
      if (node.status === 'wait') node.connect().catch(() => undefined);
      if (!listened.has(node)) {
        listened.add(node);
        node.on('ready', check);
        node.on('end', check);
      }
    };
    const finish = (): void => {
      clearTimeout(timer);
      for (const node of listened) {
        node.off('ready', check);
        node.off('end', check);
      }
      cluster.off('refresh', check);
      cluster.off('+node', check);
      cluster.off('-node', check);
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`the connection to the slot's master is not ready within ${timeoutMs} ms (${state})`));
    }, timeoutMs);
    cluster.on('refresh', check);
    cluster.on('+node', check);
    cluster.on('-node', check);
    check();
  });
}

/** The client's state, and on a Cluster each master connection's: what a timed-out wait reports. */
function connectionStates(client: RedisClient): string {
  if (!(client instanceof Cluster) || client.status !== 'ready') return client.status;
  return client
    .nodes('master')
    .map((n) => `${nodeKeyOf(n)} ${n.status}`)
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

/** What a Cluster's pub/sub connection is kept by (ioredis's ClusterSubscriber); not in ioredis's types. */
interface ClusterSubscriberLike {
  selectSubscriber(): void;
  getInstance(): Redis | null;
}

/**
 * Calls `connected` with the connection the subscriber's SUBSCRIBEs go out on, each time one is ready
 * after a connection was lost. One Redis reconnects its own connection and says
 * so ('ready'). A Cluster's pub/sub runs on a connection ioredis makes anew, to any node, when the last
 * one ends (ClusterSubscriber.selectSubscriber), and the Cluster itself says nothing of it: hence the hook
 * on that method, the one place each new connection is made. Without it, notices published while the
 * connection was away were lost for good, and a blocking query answered only when its wait ran out, with
 * the state from before the gap.
 */
export function onSubscriberConnection(subscriber: RedisClient, connected: (connection: Redis) => void): void {
  // The first connection comes before any subscription is confirmed (a watch waits for its SUBSCRIBE's
  // reply, then reads), so nothing was missed: only later ones count. Counting the first made every
  // watcher that began meanwhile read twice.
  let made = 0;
  if (!(subscriber instanceof Cluster)) {
    subscriber.on('ready', () => {
      if (made++ > 0) connected(subscriber);
    });
    return;
  }
  const inner = (subscriber as unknown as { subscriber?: ClusterSubscriberLike }).subscriber;
  // An ioredis that keeps it otherwise: nothing to hook (test/redis/cluster-subscriber.test.ts fails then).
  if (inner === undefined || typeof inner.selectSubscriber !== 'function' || typeof inner.getInstance !== 'function') return;
  const select = inner.selectSubscriber.bind(inner);
  inner.selectSubscriber = () => {
    select();
    const connection = inner.getInstance();
    if (connection !== null && made++ > 0) connection.once('ready', () => connected(connection));
  };
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
