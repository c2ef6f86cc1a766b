import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { AcquireInput, AcquireOutcome, LockState, LockStore, RenewOutcome } from '../store.js';
import { KeySpace } from './keys.js';
import { MisalignedReplyError, parseAcquire, parseInspect, parseRelease, parseRenew } from './replies.js';
import { defineScripts } from './scripts.js';

export interface RedisStoreOptions {
  readonly url: string;
  readonly keyPrefix: string;
  /** Upper bound on one command's round trip; past it the caller gets a 503, not a hang. */
  readonly commandTimeoutMs: number;
  /** How long a lock's hash (and so its last fencing token) outlives its lease. */
  readonly fenceGraceMs: number;
  readonly log?: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

/** ioredis's message when a command outlives `commandTimeout`. */
const COMMAND_TIMED_OUT = 'Command timed out';

/** Reconnect quickly at first, then every second, for ever: the service recovers by itself. */
const RECONNECT_MAX_DELAY_MS = 1000;

/**
 * The Redis store: every operation is one Lua script, so check-and-set is atomic in Redis. Any number of
 * keyholder instances can share one Redis.
 */
export class RedisStore implements LockStore {
  readonly kind = 'redis';
  private readonly redis: Redis;
  private readonly keys: KeySpace;
  private readonly graceMs: number;
  /** Counts connections made ready, so a late verdict on an old connection never drops a new one. */
  private connectionEpoch = 0;
  private probing = false;

  constructor(options: RedisStoreOptions) {
    this.keys = new KeySpace(options.keyPrefix);
    this.graceMs = options.fenceGraceMs;
    this.redis = new Redis(options.url, {
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: Math.max(options.commandTimeoutMs, 1000),
      // Fail closed at once while disconnected instead of queueing requests that would be answered late.
      enableOfflineQueue: false,
      // A command in flight when the connection drops is NOT re-sent: its outcome is unknown, and the
      // caller is told so (503). Re-sending an acquire could grant a lease nobody knows the token of.
      maxRetriesPerRequest: 0,
      retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_DELAY_MS),
      // Commands issued in the same tick share one round trip: many concurrent lock calls, few syscalls.
      enableAutoPipelining: true,
      lazyConnect: false,
    });
    defineScripts(this.redis);
    const log = options.log;
    let wasReady = false;
    this.redis.on('ready', () => {
      this.connectionEpoch++;
      wasReady = true;
      log?.info({ store: 'redis' }, 'connected to Redis');
    });
    this.redis.on('error', (err: Error) => {
      // Logged once per outage, not once per reconnect attempt.
      if (wasReady) log?.warn({ store: 'redis', err: err.message }, 'Redis connection error; answering 503 until it is back');
      wasReady = false;
    });
  }

  async acquire({ key, ownerToken, ttlMs, holder }: AcquireInput): Promise<AcquireOutcome> {
    const reply = await this.call(async () =>
      parseAcquire(await this.redis.khAcquire(this.keys.lock(key), ownerToken, ttlMs, holder ?? '', this.graceMs)),
    );
    return reply.granted
      ? { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs }
      : { acquired: false, retryAfterMs: reply.retryAfterMs };
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const reply = await this.call(async () =>
      parseRenew(await this.redis.khRenew(this.keys.lock(key), ownerToken, ttlMs, this.graceMs)),
    );
    return reply.renewed
      ? { renewed: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs }
      : { renewed: false };
  }

  async release(key: string, ownerToken: string): Promise<boolean> {
    return this.call(async () => parseRelease(await this.redis.khRelease(this.keys.lock(key), ownerToken, this.graceMs)));
  }

  async inspect(key: string): Promise<LockState | null> {
    const reply = await this.call(async () => parseInspect(await this.redis.khInspect(this.keys.lock(key))));
    if (!reply.held) return null;
    return {
      holder: reply.holder,
      fencingToken: reply.fencingToken,
      expiresAtMs: reply.expiresAtMs,
      ttlRemainingMs: reply.ttlRemainingMs,
    };
  }

  async ping(): Promise<void> {
    await this.call(() => this.echoPing());
  }

  /** PING with a message echoes it: a reply meant for another call cannot pass for this one. */
  private async echoPing(): Promise<void> {
    const nonce = randomBytes(12).toString('base64url');
    const reply = await this.redis.ping(nonce);
    if (reply !== nonce) throw new MisalignedReplyError('ping');
  }

  /**
   * After a command timed out: one echo PING (with its own timeout) goes behind everything already sent.
   * Replies come back in order, so if it gets its own echo every earlier reply has been read and the
   * connection is in step; if it times out or reads another call's reply, a reply was lost and the
   * connection is replaced. One probe at a time, so a burst of timeouts costs one PING.
   */
  private probeAlignment(): void {
    if (this.probing) return;
    this.probing = true;
    const epoch = this.connectionEpoch;
    this.echoPing()
      .catch(() => this.replaceConnection(epoch))
      .finally(() => {
        this.probing = false;
      });
  }

  /** Drops the connection (ioredis reconnects), unless it has already been replaced since `epoch`. */
  private replaceConnection(epoch: number): void {
    if (epoch !== this.connectionEpoch || this.redis.status !== 'ready') return;
    this.redis.disconnect(true);
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  /**
   * Runs one Redis call; every failure (disconnected, timed out, script error, reply of the wrong
   * shape) becomes StoreUnavailableError, because none of them is a certain answer.
   */
  private async call<T>(run: () => Promise<T>): Promise<T> {
    if (this.redis.status !== 'ready') {
      throw new StoreUnavailableError(`Redis is not connected (${this.redis.status})`);
    }
    try {
      return await run();
    } catch (err) {
      // A reply meant for another call: this connection's replies are out of step; replace it.
      if (err instanceof MisalignedReplyError) this.replaceConnection(this.connectionEpoch);
      // After a timeout the reply may only be late (a busy event loop), or lost for good: find out.
      else if ((err as Error).message === COMMAND_TIMED_OUT) this.probeAlignment();
      throw new StoreUnavailableError(`Redis call failed: ${(err as Error).message}`, 1000, { cause: err });
    }
  }
}
