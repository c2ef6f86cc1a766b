import { keptLease, StoreUnavailableError } from '../../domain/errors.js';
import { InvalidRequestError } from '../../domain/errors.js';
import { randomBase64url } from '../../domain/random.js';
import type { LeaseStore, Store } from '../../domain/lease-store.js';
import type { QuotaSlotOutcome } from '../../domain/lock-values.js';
import {
  closeClient,
  connectionPatienceMs,
  createRedisClient,
  type HostPort,
  type RedisClient,
  type RedisConnection,
  type ReplicaAcks,
} from './client.js';
import { COMMAND_TIMED_OUT } from './command-deadline.js';
import { KeySpace, QUOTA_INSIDE_FROM, shardCap } from './keys.js';
import {
  confirmOnReplicas,
  dataNodes,
  dropConnection,
  echoPingOn,
  everyMasterNode,
  onSubscriberConnection,
  ownerOf,
  subscriberFor,
} from './nodes.js';
import { MisalignedReplyError, parseFlag, parseHandOver, parseScan, parseQuotaExtend, parseQuotaReserve } from './replies.js';
import { defineScripts, type Scripts } from './scripts.js';
import { startHeartbeat } from '../shared/wait-room.js';
import { leaseStoreOver } from '../shared/lease-port.js';
import { WatchMarks } from './watch-marks.js';
import { RedisLeases } from './redis-leases.js';
import { ScriptLane } from './script-lane.js';

export interface RedisStoreOptions {
  /** One Redis by URL; or give `connection` for Sentinel or a Cluster. */
  readonly url?: string;
  readonly connection?: RedisConnection;
  /**
   * Replicas that must confirm each grant and renewal (WAIT) before it is answered; with fewer, the
   * grant is rolled back and the caller gets a 503. Absent or null: answer once the primary has it.
   */
  readonly replicaAcks?: ReplicaAcks | null;
  readonly keyPrefix: string;
  /** Upper bound on one command's round trip; past it the caller gets a 503, not a hang. */
  readonly commandTimeoutMs: number;
  /** How long a lock's hash (and so its last fencing token) outlives its lease. */
  readonly fenceGraceMs: number;
  /** Most callers queued on one key at once, across all instances. */
  readonly maxWaitersPerKey?: number;
  readonly log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/**
 * 10 SCAN calls per listing page at most: bounds one admin request's work when matching keys are
 * sparse; the page then comes back short (even empty) with a cursor to go on from.
 */
const LIST_MAX_SCAN_ROUNDS = 10;

/**
 * 32: acquire and cancel scripts this instance has in Redis at once (ScriptLane); more wait in the
 * instance, before anything is sent. A lock's acquire costs Redis up to about half a millisecond when
 * its queue is long, so three instances' lanes keep Redis's own backlog near 50 ms, far below the
 * command timeout, while 32 in flight still keep a connection busy (at about 1 ms a round trip, tens
 * of thousands of acquires a second per instance).
 */
const ACQUIRES_IN_REDIS_MAX = 32;

/**
 * 30 s: how long a watched lock stays marked as watched in Redis (watch-marks.ts), renewed every 10 s
 * (each mark at its own time in the 10 s) while this instance is subscribed. Rare renewals keep a
 * watch's Redis work per change flat; a mark left behind only costs a PUBLISH per change until it runs out.
 */
const WATCH_MARK_MS = 30_000;
const WATCH_MARK_RENEW_MS = 10_000;

const newId = () => randomBase64url(9);

/** A listing cursor: a SCAN cursor, after `<node index>-` on a Cluster. */
const LIST_CURSOR = /^(?:(0|[1-9][0-9]{0,3})-)?(0|[1-9][0-9]{0,19})$/;
const MAX_SCAN_CURSOR = 2n ** 64n - 1n;

/**
 * Where a listing goes on from. A SCAN cursor is an unsigned 64-bit number, and the node index must name
 * one of the nodes; anything else is the caller's mistake, which Redis would answer with an error that
 * must not read as the store being down.
 */
function parseListCursor(cursor: string | undefined, nodes: number): { node: number; scan: string } {
  if (cursor === undefined) return { node: 0, scan: '0' };
  const match = LIST_CURSOR.exec(cursor);
  const node = Number(match?.[1] ?? 0);
  const scan = match?.[2];
  if (scan === undefined || BigInt(scan) > MAX_SCAN_CURSOR || node >= nodes) {
    throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
  }
  return { node, scan };
}

/**
 * 10 s: while the store has never connected (each attempt fails, up to one a second), one reason is
 * warned of at most once per this; a new reason at once (numbers aside: retry delays, ports).
 */
const NOT_CONNECTED_LOG_EVERY_MS = 10_000;

/** Where the store connects, for its log lines: the seed list and master name, never a URL (it may carry a password). */
function connectionTarget(connection: RedisConnection | string): object {
  if (typeof connection === 'string' || connection.mode === 'standalone') return {};
  const list = (nodes: readonly HostPort[]) => nodes.map(({ host, port }) => `${host}:${port}`).join(',');
  return connection.mode === 'sentinel'
    ? { sentinels: list(connection.sentinels), name: connection.name }
    : { nodes: list(connection.nodes) };
}

/** How long a reconnected subscriber waits for the watch marks to be set again before its watchers read again. */
const MARK_ALL_WAIT_MS = 1000;

/** `work`, or nothing once `ms` have passed (whichever comes first); the timer keeps no process alive. */
function atMost(work: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    work.then(done, done);
  });
}

/**
 * The Redis store: every operation is one Lua script, so check-and-set is atomic in Redis. Any number of
 * keyholder instances can share one Redis.
 *
 * One lease engine (redis-leases.ts) serves every primitive, with the lock scripts as its documented
 * capacity-1 fast path; `leases` is that engine as the domain's port (lease-port.ts). This
 * class holds what the engine runs on: the connection and its guard (call), the subscriber connection
 * (one per instance, not one per waiter: hand-over messages and watched keys' change notices), replica
 * acknowledgement, listings over every node, the quota slots and the health check.
 */
export class RedisStore implements Store {
  readonly kind = 'redis';
  /** Watch: change channel -> its listeners. One SUBSCRIBE per watched key per instance. */
  private readonly changeListeners = new Map<string, Set<() => void>>();
  /**
   * The quota's units sit in the lock's own shard (keys.ts): taken and given back inside the lock scripts,
   * one round trip per call. Only for a cap counted in every shard; a smaller one goes through the slot calls.
   */
  readonly quotaInside = true;
  readonly quotaInsideFrom = QUOTA_INSIDE_FROM;
  private readonly redis: RedisClient;
  private readonly scripts: Scripts;
  private readonly subscriber: RedisClient;
  private readonly keys: KeySpace;
  private readonly graceMs: number;
  private readonly maxWaitersPerKey: number;
  /** This process's identity for hand-over messages. */
  private readonly instanceId = newId();
  private readonly heartbeat: NodeJS.Timeout;
  /** Counts connections made ready, so a late verdict on an old connection never drops a new one. */
  private connectionEpoch = 0;
  private probing = false;
  private readonly replicaAcks: ReplicaAcks | null;
  private readonly commandTimeoutMs: number;
  /** The acquires and cancels (of locks, lock sets and permits) this instance has in Redis: see ScriptLane. */
  private readonly acquires: ScriptLane;
  /** Every lease: locks, lock sets, semaphores and read/write locks, on this store's connection, scripts and channel. */
  readonly engine: RedisLeases;
  /** The domain's one port: the engine, with this store's kind and quota slots. */
  readonly leases: LeaseStore;
  /** The watched locks' marks in Redis: the scripts publish change notices for marked locks only. */
  private readonly watchMarks = new WatchMarks(
    (id) =>
      this.call(async () =>
        parseFlag('watchMark', await this.scripts.run('watchMark', { lockKey: this.keys.lock(id), keepMs: WATCH_MARK_MS })),
      ),
    WATCH_MARK_RENEW_MS,
  );

  constructor(options: RedisStoreOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.graceMs = options.fenceGraceMs;
    this.maxWaitersPerKey = options.maxWaitersPerKey ?? 1000;
    const connection = options.connection ?? options.url;
    if (connection === undefined) throw new TypeError('RedisStore needs a url or a connection');
    this.replicaAcks = options.replicaAcks ?? null;
    this.commandTimeoutMs = options.commandTimeoutMs;
    // An acquire that could not even be sent within a command timeout is refused (503 overloaded): by
    // then the caller would have been told the store timed out.
    this.acquires = new ScriptLane(ACQUIRES_IN_REDIS_MAX, options.commandTimeoutMs);
    const log = options.log;
    /** The reason last warned of before the first connection, and when (see NOT_CONNECTED_LOG_EVERY_MS). */
    const notConnected = { reason: '', at: 0 };
    this.redis = createRedisClient(connection, {
      commandTimeoutMs: options.commandTimeoutMs,
      // Many concurrent lock calls, few round trips and syscalls: on a Cluster through ioredis's
      // auto-pipelining (per node); on one Redis the scripts batch a tick's writes themselves, at less
      // CPU per call (see defineScripts).
      autoPipelining: typeof connection !== 'string' && connection.mode === 'cluster',
      onReady: () => {
        this.connectionEpoch++;
        log?.info({ store: 'redis' }, 'connected to Redis');
      },
      onLost: (err) => log?.warn({ store: 'redis', err: err.message }, 'Redis connection error; answering 503 until it is back'),
      onNotConnected: (err) => {
        const reason = err.message.replace(/\d+/g, '#');
        const now = Date.now();
        if (reason === notConnected.reason && now - notConnected.at < NOT_CONNECTED_LOG_EVERY_MS) return;
        notConnected.reason = reason;
        notConnected.at = now;
        log?.warn(
          { store: 'redis', ...connectionTarget(connection), err: err.message },
          'cannot connect to Redis; answering 503 until it can',
        );
      },
    });
    // On a Cluster, a call waits (up to a command timeout) for its master's connection to be made anew
    // after it was lost, instead of being refused meanwhile (masterGate).
    this.scripts = defineScripts(this.redis, { masterWaitMs: options.commandTimeoutMs });
    // The subscriber may queue its SUBSCRIBE until connected and re-subscribes after a reconnect. Its
    // commands are retried across reconnects (maxRetriesPerRequest: null): with the lock connection's 0,
    // ioredis's own re-subscribe after a connection reset fails with an error nobody can catch, and
    // the process dies (found by the network-fault scenario).
    this.subscriber = subscriberFor(this.redis);
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, message: string) => {
      const listeners = this.changeListeners.get(channel);
      if (listeners !== undefined) for (const listener of listeners) listener();
      else this.onHandOverMessage(message);
    });
    // Notices published while the subscriber was away are lost: every watcher reads the state again,
    // once Redis has confirmed the channels on the new connection (a read sent before that could run
    // before the SUBSCRIBE, and miss a change made in between). ioredis re-subscribes too; a SUBSCRIBE of
    // a channel already subscribed changes nothing.
    onSubscriberConnection(this.subscriber, (connection) => {
      const channels = [this.keys.grantChannelPrefix() + this.instanceId, ...this.changeListeners.keys()];
      const readAgain = () => {
        for (const listeners of this.changeListeners.values()) for (const listener of listeners) listener();
      };
      // The marks too (Redis may have restarted without its data): a change after the read is announced.
      // Waited for MARK_ALL_WAIT_MS at most: on a Cluster, marks of locks on a master still down each wait
      // out the command timeout, and the watchers of every other lock must not wait for them to read again.
      connection
        .subscribe(...channels)
        .then(() => atMost(this.watchMarks.markAll(), MARK_ALL_WAIT_MS))
        .then(readAgain, readAgain);
    });
    this.subscriber.subscribe(this.keys.grantChannelPrefix() + this.instanceId).catch(() => undefined);

    this.engine = new RedisLeases({
      redis: this.redis,
      scripts: this.scripts,
      keys: this.keys,
      instanceId: this.instanceId,
      graceMs: this.graceMs,
      maxWaitersPerKey: this.maxWaitersPerKey,
      replicaAcks: this.replicaAcks !== null,
      call: (run) => this.call(run),
      ensureConnected: () => this.ensureConnected(),
      callFailed: (err) => this.callFailed(err),
      acquires: this.acquires,
      scanIds: (pattern, limit, cursor, idOf) => this.scanIds(pattern, limit, cursor, idOf),
      // A permit's id tags its keys like a lock's, so the lock key names the same node and slot.
      replicated: (id, what, servedBy, giveBack) => this.replicated(id, what, servedBy, giveBack),
      servedBy: (id) => this.servedBy(id),
      watchChannel: (channel, onChange, markKey) => this.watchChannel(channel, onChange, markKey),
    });
    this.leases = leaseStoreOver(this, this.engine);
    this.heartbeat = startHeartbeat(() => this.engine.visitAll());
  }

  /**
   * The subscription behind the engine's watchChanges, for any change channel. Resolves once Redis
   * confirmed the subscription; while Redis is unreachable, rejects with a 503 instead of waiting (the
   * subscriber itself would wait for ever). `markKey`: the lock whose scripts publish only while it is
   * marked as watched (watch-marks.ts); permits always publish.
   */
  private async watchChannel(channel: string, onChange: () => void, markKey?: string): Promise<() => void> {
    let listeners = this.changeListeners.get(channel);
    const listener = () => onChange();
    if (listeners === undefined) {
      listeners = new Set();
      this.changeListeners.set(channel, listeners);
      listeners.add(listener);
      const fresh = listeners;
      try {
        await this.call(() => this.subscribeWithin(channel));
        // Marked after subscribing: a change the scripts publish from now on reaches this instance.
        if (markKey !== undefined) {
          await this.watchMarks.add(markKey, () => {
            for (const each of fresh) each();
          });
        }
      } catch (err) {
        listeners.delete(listener);
        if (listeners.size === 0 && this.changeListeners.get(channel) === listeners) {
          this.changeListeners.delete(channel);
          this.subscriber.unsubscribe(channel).catch(() => undefined);
        }
        throw err;
      }
    } else {
      listeners.add(listener);
    }
    const mine = listeners;
    return () => {
      mine.delete(listener);
      if (mine.size === 0 && this.changeListeners.get(channel) === mine) {
        this.changeListeners.delete(channel);
        if (markKey !== undefined) this.watchMarks.delete(markKey);
        this.subscriber.unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  private subscribeWithin(channel: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(COMMAND_TIMED_OUT)), this.commandTimeoutMs);
      this.subscriber.subscribe(channel).then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  /**
   * One listing page of ids: SCAN rounds with MATCH `pattern` over every data node in turn (one, or each
   * Cluster master), until `limit` ids or LIST_MAX_SCAN_ROUNDS. `idOf` turns a key into an id (null: not
   * one of the listed kind). Shared by the lock and the permit listings.
   */
  private async scanIds(
    pattern: string,
    limit: number,
    cursor: string | undefined,
    idOf: (redisKey: string) => string | null,
  ): Promise<{ ids: string[]; nextCursor: string | null }> {
    // Every master the slot map names, each connected (on a Cluster a dropped connection is waited for).
    const nodes = await this.call(async () => {
      const all = await everyMasterNode(this.redis, this.commandTimeoutMs);
      if (all.length === 0) throw new StoreUnavailableError('no Redis node is known yet');
      return all;
    });
    let { node, scan } = parseListCursor(cursor, nodes.length);
    const found = new Set<string>();
    for (let round = 0; round < LIST_MAX_SCAN_ROUNDS && node < nodes.length; round++) {
      const target = nodes[node] as (typeof nodes)[number];
      const page = await this.call(async () => parseScan(await target.scan(scan, 'MATCH', pattern, 'COUNT', limit)));
      scan = page.cursor;
      for (const redisKey of page.keys) {
        const id = idOf(redisKey);
        if (id !== null) found.add(id);
      }
      if (scan === '0') node++;
      if (found.size >= limit) break;
    }
    const nextCursor = node >= nodes.length ? null : nodes.length === 1 ? scan : `${node}-${scan}`;
    return { ids: [...found], nextCursor };
  }

  async reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    const args = {
      quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots),
      quotaSlotId,
      ttlMs,
      maxQuotaSlots: shardCap(maxQuotaSlots),
    };
    return this.call(async () => parseQuotaReserve(await this.scripts.run('quotaReserve', args)));
  }

  async extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void> {
    const args = { quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots), quotaSlotId, expiresAtMs };
    await this.call(async () => parseQuotaExtend(await this.scripts.run('quotaExtend', args)));
  }

  async freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void> {
    await this.call(() => this.scripts.run('quotaFree', { quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots), quotaSlotId }));
  }

  /** One step, in the slot's own shard: given back and retired together (quota-free.lua with an end). */
  async retireQuotaSlot(namespace: string, quotaSlotId: string, untilMs: number, maxQuotaSlots: number): Promise<void> {
    const args = { quota: this.keys.quotaFor(namespace, quotaSlotId, maxQuotaSlots), quotaSlotId, retiredUntilMs: untilMs };
    await this.call(() => this.scripts.run('quotaFree', args));
  }

  async ping(): Promise<void> {
    await this.call(() => this.echoPing());
  }

  /**
   * PING with a message echoes it: a reply meant for another call cannot pass for this one. On a
   * Cluster every master is asked (a PING without a key would reach one node at random), and the store
   * counts as up while any of them answers: every instance shares the Cluster, so a load balancer that
   * took them all out for one dead master would stop the other masters' namespaces too. Calls on the
   * dead master's namespaces answer 503 on their own. A reply out of step fails the ping either way.
   */
  private async echoPing(): Promise<void> {
    const results = await Promise.allSettled(this.dataNodes().map((node) => echoPingOn(node)));
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    const misaligned = failures.find((err) => err instanceof MisalignedReplyError);
    if (misaligned !== undefined) throw misaligned;
    if (failures.length === results.length && failures[0] !== undefined) throw failures[0];
  }

  /** The nodes holding data (every master of a Cluster); none known is an outage. */
  private dataNodes(): ReturnType<typeof dataNodes> {
    const nodes = dataNodes(this.redis);
    if (nodes.length === 0) throw new StoreUnavailableError('no Redis node is known yet');
    return nodes;
  }

  /**
   * After a command timed out: one echo PING goes behind everything already sent. Replies come back in
   * order, so if it gets its own echo every earlier reply has been read and the connection is in step;
   * if it reads another call's reply, a reply was lost and the connection is replaced. A PING that
   * gets no answer at all for connectionPatienceMs means a broken connection (replaced too); one
   * only slower than a lock call's timeout is a slow Redis, which a new connection would not make
   * faster: replacing it at once (as this probe did, with the lock calls' timeout) kept an instance
   * reconnecting, and unavailable, for seconds after a Redis restart on a loaded host. Lock calls keep
   * failing fast meanwhile, and a reply out of step is still caught by every call's own echo. One
   * probe at a time, so a burst of timeouts costs one PING. On a Cluster each master's connection is
   * probed, and only one that fails is replaced: a master that died must not cost the connections to
   * the others (their namespaces keep being served).
   */
  private probeAlignment(): void {
    if (this.probing) return;
    this.probing = true;
    const epoch = this.connectionEpoch;
    const nodes = dataNodes(this.redis);
    const patienceMs = connectionPatienceMs(this.commandTimeoutMs);
    void Promise.all(nodes.map((node) => echoPingOn(node, patienceMs).catch(() => this.replaceConnection(epoch, node)))).finally(() => {
      this.probing = false;
    });
  }

  /** Drops a connection (ioredis reconnects), unless the client has been reconnected since `epoch`. */
  private replaceConnection(epoch: number, node?: ReturnType<typeof dataNodes>[number]): void {
    if (epoch !== this.connectionEpoch || this.redis.status !== 'ready') return;
    dropConnection(this.redis, node);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.watchMarks.close();
    await this.engine.closeAll(new StoreUnavailableError('the store is closing'));
    // closeClient, not quit() then disconnect(): with Redis gone, a QUIT waited out its 3 s deadline, and
    // disconnect() left a client between two attempts 'reconnecting' for ever, a timer keeping the process
    // alive. The subscriber sends nothing that a QUIT would wait for: just closed.
    await Promise.all([closeClient(this.subscriber, { quit: false }), closeClient(this.redis)]);
  }

  private onHandOverMessage(message: string): void {
    const notice = parseHandOver(message);
    if (notice !== null) this.engine.handedOver(notice);
  }

  /** With replica acks on a Cluster: the master serving `id` before its script runs (see confirmOnReplicas). */
  private servedBy(id: string): string | null {
    return this.replicaAcks ? ownerOf(this.redis, this.keys.lock(id)) : null;
  }

  /**
   * With replica acknowledgement on: WAIT on the same connection that ran the script (WAIT counts the
   * replicas that have every write this connection made so far, and it cannot run inside a script; on
   * a Cluster that is the connection to the lock's master, see confirmOnReplicas).
   * Too few in time: the lease is given back by its owner token (one atomic script, so a lease someone
   * else took meanwhile is untouched) and the caller gets a 503, never a lease that a failover could
   * hand to someone else. A renewal that was not confirmed is NOT given back: its holder still relies
   * on the lease it was last confirmed (until that one's end), so taking the lock away now could hand
   * it to a second caller inside that lease. The caller gets a 503 and keeps the end it knew. Nor is
   * a grant asked with an Idempotency-Key (`keyed grant`, and its replays): a retry with the key, on any
   * instance, may hold it already as its replay, so given back, another caller would be granted the lock
   * while that 200 still ran. It is refused (503, the lease kept: its quota slot counts on), and the
   * retry with the key gets it once a replica confirms it.
   */
  private async replicated(
    id: string,
    what: 'grant' | 'keyed grant' | 'replay' | 'renewal',
    servedBy: string | null,
    // The engine gives a lease back through its own kind's script (redis-leases.ts).
    giveBack: () => Promise<unknown>,
  ): Promise<void> {
    const acks = this.replicaAcks;
    if (!acks) return;
    const rollBack = () => (what === 'grant' ? giveBack() : Promise.resolve(false));
    let confirmed: number;
    try {
      const lockKey = this.keys.lock(id);
      confirmed = await this.call(() => confirmOnReplicas(this.redis, lockKey, servedBy, acks.minReplicas, acks.timeoutMs));
    } catch (err) {
      // The connection broke or timed out: try to give the lease back; if that cannot reach Redis
      // either, the lease runs out by its TTL. The caller is told 503 either way.
      void rollBack();
      // (A replay kept nothing of its own: told as a plain 503, its call's slot goes back.)
      if (what === 'replay') throw new StoreUnavailableError(`the replay could not be confirmed: ${(err as Error).message}`);
      throw what === 'keyed grant' && err instanceof StoreUnavailableError ? keptLease(err) : err;
    }
    if (confirmed >= acks.minReplicas) return;
    await rollBack();
    const unconfirmed = `the ${what === 'renewal' ? 'renewal' : 'grant'} reached ${confirmed} of ${acks.minReplicas} replicas within ${acks.timeoutMs} ms`;
    if (what === 'keyed grant') {
      throw keptLease(
        new StoreUnavailableError(`${unconfirmed}; the lease was kept for its Idempotency-Key (a retry with the key gets it)`),
      );
    }
    if (what === 'replay') {
      // Kept as well, but it is an earlier call's lease, counted under that call's slot: this call kept
      // nothing of its own (its slot goes back).
      throw new StoreUnavailableError(`${unconfirmed}; the lease stays kept for its Idempotency-Key (ask again)`);
    }
    throw new StoreUnavailableError(`${unconfirmed} and was rolled back`);
  }

  /**
   * Runs one Redis call; every failure (disconnected, timed out, script error, reply of the wrong
   * shape) becomes StoreUnavailableError, because none of them is a certain answer.
   */
  private async call<T>(run: () => Promise<T>): Promise<T> {
    this.ensureConnected();
    try {
      return await run();
    } catch (err) {
      throw this.callFailed(err);
    }
  }

  /** The check every call makes before it sends anything: StoreUnavailableError unless connected. */
  private ensureConnected(): void {
    if (this.redis.status !== 'ready') {
      throw new StoreUnavailableError(`Redis is not connected (${this.redis.status})`);
    }
  }

  /** What a call's failure becomes (StoreUnavailableError), and what it says about the connection. */
  private callFailed(err: unknown): StoreUnavailableError {
    // A reply meant for another call: this connection's replies are out of step; replace it.
    if (err instanceof MisalignedReplyError) this.replaceConnection(this.connectionEpoch);
    // After a timeout the reply may only be late (Redis slow), or lost for good: find out.
    else if ((err as Error).message === COMMAND_TIMED_OUT) this.probeAlignment();
    return new StoreUnavailableError(`Redis call failed: ${(err as Error).message}`, 1000, { cause: err, outcomeUnknown: true });
  }
}
