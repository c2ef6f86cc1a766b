import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
// ioredis's own handler of a closed socket: the one way to end a client whose socket is already gone (see closeClient).
import { closeHandler } from 'ioredis/built/redis/event_handler.js';
// ioredis's Sentinel failover detector, made to heed its own master's switches only (see ownSwitchesOnly).
import { FailoverDetector } from 'ioredis/built/connectors/SentinelConnector/FailoverDetector.js';
import { withCommandDeadlines } from './command-deadline.js';

/** Reconnect quickly at first, then every second, for ever: the service recovers by itself. */
const RECONNECT_MAX_DELAY_MS = 1000;

/** 100 ms: how often the ready check asks a Redis that is still loading its data again. */
const LOADING_RECHECK_MS = 100;

/**
 * How long a connection may answer nothing before it is given up on as broken (closed and made again):
 * four command timeouts, and at least 3 s. A Redis that is only slow (just restarted, reloading its
 * append-only file, every write waiting for its fsync, on a loaded host) answers later, and a new
 * connection would wait behind the same slow Redis after paying for its own setup; giving up sooner
 * only made an instance unavailable for longer. Measured under a CPU load of 25 on two cores, right
 * after a Redis restart: ready checks answered after up to 3.4 s, echo PINGs after up to 1.2 s.
 * Lock calls keep their own short deadline: they fail (503) meanwhile, they do not wait.
 */
export function connectionPatienceMs(commandTimeoutMs: number): number {
  return Math.max(commandTimeoutMs * 4, 3_000);
}

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * How to reach Redis: one server by URL, the primary that a set of Sentinels points at, or a Redis
 * Cluster through some of its nodes (the client learns the rest, and the slot map, from them).
 */
export type RedisConnection =
  | { readonly mode: 'standalone'; readonly url: string }
  | { readonly mode: 'sentinel'; readonly sentinels: readonly HostPort[]; readonly name: string }
  | { readonly mode: 'cluster'; readonly nodes: readonly HostPort[] };

/** A client of one Redis (standalone or through Sentinel) or of a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** Replicas that must confirm a grant (WAIT) before it is answered, and for how long to wait for them. */
export interface ReplicaAcks {
  readonly minReplicas: number;
  readonly timeoutMs: number;
}

export interface RedisClientOptions {
  /**
   * Upper bound on one command's round trip; past it the call fails instead of hanging. Counted as
   * Redis's time, not this process's: see armDeadline.
   */
  readonly commandTimeoutMs: number;
  /** Commands issued in the same tick share one round trip (the lock store's hot path wants this). */
  readonly autoPipelining?: boolean;
  /** Called on the first error after the connection was ready: once per outage, not per reconnect attempt. */
  readonly onLost?: (err: Error) => void;
  /** Called each time the connection becomes ready. */
  readonly onReady?: () => void;
  /**
   * Called on each error before the connection was first ready: why it cannot be made (a Sentinel
   * master name the sentinels do not know, no sentinel answering, a password Redis asks for, nothing
   * listening). Not an outage (onLost), but without it a start with a wrong setting logged nothing at all.
   */
  readonly onNotConnected?: (err: Error) => void;
}

/**
 * The one way keyholder connects to Redis: set up to fail fast and closed. While disconnected a
 * command errors at once (no offline queue) instead of being answered late; a command in flight when
 * the connection drops is NOT re-sent (its outcome is unknown, and re-sending an acquire could grant a
 * lease nobody knows the token of); reconnection goes on for ever.
 *
 * Through Sentinel, every (re)connection first asks the sentinels where the primary is, so a failover
 * is followed without a restart; calls during the switch fail (503) rather than wait.
 */
export function createRedisClient(target: string | Exclude<RedisConnection, { mode: 'cluster' }>, options: RedisClientOptions): Redis;
export function createRedisClient(target: string | RedisConnection, options: RedisClientOptions): RedisClient;
export function createRedisClient(target: string | RedisConnection, options: RedisClientOptions): RedisClient {
  const connection: RedisConnection = typeof target === 'string' ? { mode: 'standalone', url: target } : target;
  // No ioredis commandTimeout: its bare timer fires while a reply that arrived sits unread behind a busy
  // event loop; withCommandDeadlines (below) sets the deadline instead.
  const connectTimeoutMs = Math.max(options.commandTimeoutMs, 1000);
  const common: RedisOptions = {
    connectTimeout: connectTimeoutMs,
    // A Redis still loading its data is asked again every 100 ms, not after its own estimate (a
    // second at least): the instance answers again as soon as the data is back.
    maxLoadingRetryTime: LOADING_RECHECK_MS,
    // No CLIENT SETINFO on each connection: two more round trips (and a file read) before the ready
    // check, on the path that brings an instance back after an outage.
    disableClientInfo: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_DELAY_MS),
    enableAutoPipelining: options.autoPipelining ?? false,
    lazyConnect: false,
  };
  const redis =
    connection.mode === 'cluster'
      ? createClusterClient(connection.nodes, common, options.commandTimeoutMs)
      : connection.mode === 'standalone'
        ? new Redis(connection.url, common)
        : new Redis({
            ...common,
            sentinels: connection.sentinels.map(({ host, port }) => ({ host, port })),
            name: connection.name,
            role: 'master',
            // Subscribes to +switch-master on a sentinel: the client moves to a new primary as soon as it
            // is announced, not only once the old connection breaks.
            failoverDetector: true,
            // Ask the sentinels again every 100 ms, at most every second: a failover takes seconds.
            sentinelRetryStrategy: (attempt) => Math.min(attempt * 100, RECONNECT_MAX_DELAY_MS),
            sentinelCommandTimeout: Math.max(options.commandTimeoutMs, 1000),
            // A primary demoted under the client answers writes with READONLY: reconnect (which asks the
            // sentinels where the primary is now) without re-sending the command; the caller gets a 503.
            reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 1 : false),
          });
  if (connection.mode === 'sentinel') ownSwitchesOnly();
  withCommandDeadlines(redis, options.commandTimeoutMs, connectionPatienceMs(options.commandTimeoutMs));
  let wasReady = false;
  let everReady = false;
  redis.on('ready', () => {
    wasReady = true;
    everReady = true;
    options.onReady?.();
  });
  redis.on('error', (err: Error & { command?: { name?: string } }) => {
    // Only the refusal of the number itself: a SELECT may also meet a BUSY script or a NOAUTH (a password
    // being rotated), outages to ride out like any other.
    if (err.command?.name === 'select' && DATABASE_REFUSED.test(err.message)) refusedDatabase(err);
    if (wasReady) options.onLost?.(err);
    else if (!everReady) options.onNotConnected?.(err);
    wasReady = false;
  });
  return redis;
}

/** What ownSwitchesOnly reads of ioredis's FailoverDetector (its fields are private in ioredis's types). */
interface FailoverDetectorState {
  readonly connector: { readonly options: { readonly name?: string } };
  readonly sentinels: ReadonlyArray<{ readonly client: Redis }>;
  readonly isDisconnected: boolean;
  disconnect(): void;
}

const SWITCH_MASTER = '+switch-master';
let switchesFiltered = false;

/**
 * ioredis's failover detector drops the connection on every `+switch-master` a sentinel announces, whatever
 * master it names (ioredis 5.11): where the sentinels also watch other masters, each failover of another
 * one dropped the connection to a healthy primary, and every call on it was answered 503 (an acquire
 * possibly granted, its lease then held by nobody until its TTL). Its subscribe is replaced, once for the
 * process, by the same one heeding only announcements that name the client's own master (the message is
 * `<name> <old ip> <old port> <new ip> <new port>`).
 */
function ownSwitchesOnly(): void {
  if (switchesFiltered) return;
  switchesFiltered = true;
  FailoverDetector.prototype.subscribe = async function (this: FailoverDetector): Promise<void> {
    const detector = this as unknown as FailoverDetectorState;
    const name = detector.connector.options.name;
    await Promise.all(
      detector.sentinels.map(({ client }) => {
        client.on('message', (channel: string, message: string) => {
          if (!detector.isDisconnected && channel === SWITCH_MASTER && message.split(' ')[0] === name) detector.disconnect();
        });
        // A sentinel that cannot be subscribed to is left out, as in ioredis.
        return client.subscribe(SWITCH_MASTER).catch(() => undefined);
      }),
    );
  };
}

/** Redis's answer to a SELECT of a database it does not have (7.x: "DB index is out of range"; older: "invalid DB index"). */
const DATABASE_REFUSED = /DB index is out of range|invalid DB index/i;

/**
 * Redis refused the SELECT of REDIS_URL's database (it has fewer databases): ioredis only reports it and
 * goes on in database 0, where the locks of whatever else uses it live. That is a configuration error,
 * not an outage to ride out: stop at once, in one line naming the variable.
 */
function refusedDatabase(err: Error): never {
  process.stderr.write(`keyholder: REDIS_URL: Redis refused its database number (${err.message}); name a database this Redis has\n`);
  process.exit(2);
}

/** The parts of an ioredis client that disconnect() sets before it closes the socket (see endBetweenAttempts). */
interface ClosingState {
  manuallyClosing: boolean;
  reconnectTimeout: NodeJS.Timeout | null;
}

/**
 * Closes a client for good. A ready one is sent QUIT (the replies it waits for come first), and is
 * disconnected if that fails; any other is disconnected at once, QUIT unsent: with no offline queue it
 * could not be written anyway, and its deadline (the longer one of a connection not ready) kept a timer
 * running for seconds for nothing. A client between two connection attempts (a Redis that never came
 * up, or went away) is ended here too: ioredis's disconnect() leaves it as it was (see endBetweenAttempts).
 * A Cluster client is closed as before (QUIT, else disconnect). With `quit: false` (a subscriber, which
 * has no replies to wait for) no QUIT is sent: closed at once whatever its state.
 */
export async function closeClient(client: RedisClient, { quit = true }: { quit?: boolean } = {}): Promise<void> {
  if (quit && (client instanceof Cluster || client.status === 'ready')) {
    try {
      await client.quit();
      return;
    } catch {
      // Not answered: closed as it is now, below (the connection may have dropped meanwhile).
    }
  }
  if (client instanceof Cluster) client.disconnect();
  else if (client.status === 'reconnecting') endBetweenAttempts(client);
  else if (client.status !== 'end') client.disconnect();
}

/**
 * Ends a client whose socket is closed while it waits to try again. ioredis's disconnect() then stops the
 * next attempt but waits for its socket's 'close' to end the client, an event that came already: the
 * client stayed 'reconnecting' for ever (never 'end', its calls never told it is closed), and its
 * socket's end, asked of a socket already closed, armed a 2 s timer that kept the process alive
 * (ioredis 5.11, unchanged in 6.0; redis/ioredis#1247). What disconnect() does before it closes the socket is done here,
 * then what a socket's 'close' does to a client closed on purpose: 'close', then 'end', its queues failed.
 */
function endBetweenAttempts(client: Redis): void {
  const state = client as unknown as ClosingState;
  state.manuallyClosing = true;
  if (state.reconnectTimeout !== null) clearTimeout(state.reconnectTimeout);
  state.reconnectTimeout = null;
  closeHandler(client)();
}

/** 1 s: how often a Cluster client re-reads the slot map unasked, so a failover is seen within a second. */
const SLOTS_REFRESH_INTERVAL_MS = 1000;

/**
 * A Redis Cluster client, failing fast and closed like the others. Redirections are followed: MOVED and
 * ASK (the slot lives, or is moving, elsewhere) and TRYAGAIN (a slot half moved) mean the node did NOT
 * run the command, so sending it where the slot now is cannot run it twice. A command whose node
 * connection closed is never re-sent (retryDelayOnFailover 0: its outcome is unknown), nor is one that
 * met CLUSTERDOWN (retryDelayOnClusterDown 0): the caller gets a 503 at once, and the slot map is read
 * again so the next call goes to the promoted replica. Every retry stays inside the command's one
 * timeout (withCommandDeadlines arms it once per command).
 */
function createClusterClient(nodes: readonly HostPort[], common: RedisOptions, commandTimeoutMs: number): Cluster {
  const { retryStrategy, enableOfflineQueue, enableAutoPipelining, lazyConnect, ...perNode } = common;
  const clusterOptions: ClusterOptions = {
    redisOptions: perNode,
    enableOfflineQueue,
    enableAutoPipelining,
    lazyConnect,
    clusterRetryStrategy: (attempt) => retryStrategy?.(attempt) ?? RECONNECT_MAX_DELAY_MS,
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    retryDelayOnTryAgain: 20,
    retryDelayOnMoved: 0,
    slotsRefreshInterval: SLOTS_REFRESH_INTERVAL_MS,
    // No CLUSTER INFO ready check: without an offline queue it goes to a random node and fails while
    // that node's connection is still being made, and a failed check restarts every connection (seen
    // under load: a client that never became ready). Each command meets the cluster's state anyway
    // (CLUSTERDOWN answers 503).
    enableReadyCheck: false,
    slotsRefreshTimeout: Math.max(commandTimeoutMs, 1000),
  };
  const cluster = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    clusterOptions,
  );
  // A node lost: its slots are likely being failed over; learn the new owners without waiting.
  cluster.on('node error', () => {
    cluster.refreshSlotsCache();
  });
  return cluster;
}
