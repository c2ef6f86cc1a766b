import { renewedFrom } from '../shared/lease-replies.js';
import { performance } from 'node:perf_hooks';
import type { RedisClient } from './client.js';
import { StoreUnavailableError, TooManyWaitersError } from '../../domain/errors.js';
import type { ReleaseRequest, ReleaseRequestInput, RenewOutcome } from '../../domain/lock-store.js';
import {
  MAX_HOLDERS_SHOWN,
  type EvictedPermit,
  type IndexedPermitState,
  type PermitAcquireInput,
  type PermitAcquireOutcome,
  type PermitKind,
  type PermitListPage,
  type PermitListQuery,
  type PermitState,
  type PermitStore,
  type QueuedCaller,
} from '../../domain/permit-store.js';
import { randomBase64url } from '../../domain/random.js';
import { type KeySpace, permitKindLetter } from './keys.js';
import {
  parseCancel,
  parseLease,
  parsePermitAcquire,
  parsePermitForceRelease,
  parsePermitHeartbeat,
  parsePermitInspect,
  parseQueue,
  parseRelease,
  parseRequestRelease,
  releaseRequestPayload,
  type PermitAcquireReply,
} from './replies.js';
import type { HandOverArgs, ScriptArgs, ScriptName, Scripts } from './scripts.js';
import { WaitRoom, type Waiter } from '../shared/wait-room.js';
import type { ScriptLane } from './script-lane.js';

/** What the permits borrow from the Redis store they live in: its connection, scripts and guards. */
export interface RedisPermitsDeps {
  readonly redis: RedisClient;
  readonly scripts: Scripts;
  readonly keys: KeySpace;
  readonly instanceId: string;
  readonly graceMs: number;
  readonly maxWaitersPerKey: number;
  readonly livenessMs: number;
  /** Runs one Redis call; every failure becomes StoreUnavailableError (RedisStore.call). */
  call<T>(run: () => Promise<T>): Promise<T>;
  /** The store's lane for acquire and cancel scripts (ScriptLane): permits share it with locks. */
  readonly acquires: ScriptLane;
  /** One listing page of ids over every data node (RedisStore.scanIds: one Redis, or each Cluster master). */
  scanIds(
    pattern: string,
    limit: number,
    cursor: string | undefined,
    idOf: (redisKey: string) => string | null,
  ): Promise<{ ids: string[]; nextCursor: string | null }>;
  /** Waits for replica acknowledgement when configured; a grant not confirmed is given back by `giveBack`. */
  replicated(id: string, what: 'grant' | 'renewal', servedBy: string | null, giveBack: () => Promise<unknown>): Promise<void>;
  /** The node that serves `id`'s slot now, read before a script (RedisStore.servedBy; null without acks). */
  servedBy(id: string): string | null;
  /** Subscribes to a change channel (RedisStore.watchChannel: one SUBSCRIBE however many listeners). */
  watchChannel(channel: string, onChange: () => void): Promise<() => void>;
}

/** A waiter id names its kind, so one hand-over message or heartbeat reaches the right room's key. */
interface PermitWaiter extends Waiter {
  readonly kind: PermitKind;
}

/**
 * The Redis store's semaphores and read/write locks: one Lua script per operation (permit-*.lua, the
 * shared rules in _permits.lua), keys tagged by namespace as a lock's are (KeySpace.permitKeys), and
 * waiting exactly as for locks: queued in Redis, handed over inside the script that frees room,
 * announced on the waiter's instance channel, with heartbeats for missed messages and dead instances.
 */
export class RedisPermits implements PermitStore {
  private readonly room: WaitRoom<PermitAcquireOutcome>;
  /** The kind of each key this instance has waiters on (the room is keyed by `kind key`). */
  constructor(private readonly deps: RedisPermitsDeps) {
    this.room = new WaitRoom<PermitAcquireOutcome>({
      confirm: (waiter) => this.confirm(waiter as PermitWaiter),
      notGranted: (retryAfterMs) => ({ acquired: false, reason: 'full', retryAfterMs }),
      cancel: (waiter) => this.cancel(waiter as PermitWaiter),
      release: (roomKey, ownerToken) => {
        const { kind, key } = splitRoomKey(roomKey);
        return this.releasePermit(kind, key, ownerToken);
      },
      visit: (roomKey, waiters) => this.visit(roomKey, waiters),
    });
  }

  /** A hand-over message or heartbeat named this waiter (ids are unique; unknown ones are ignored). */
  granted(waiterId: string): void {
    this.room.granted(waiterId);
  }

  visitAll(): void {
    this.room.visitAll();
  }

  closeAll(reason: unknown): Promise<void> {
    return this.room.closeAll(reason);
  }

  async acquirePermit(input: PermitAcquireInput): Promise<PermitAcquireOutcome> {
    const waitMs = input.waitMs ?? 0;
    // Decided when the script is sent, after its turn in the lane (as for locks, RedisStore.acquire).
    let decidedAt = 0;
    let servedBy: string | null = null;
    const send = (waitFor: number, waiterId: string) =>
      this.deps.acquires.run(() => {
        decidedAt = performance.now();
        servedBy = this.deps.servedBy(input.key);
        return this.runAcquire(input, waitFor, waiterId);
      }, true);
    if (waitMs <= 0) {
      input.signal?.throwIfAborted();
      const reply = await send(0, '-');
      return this.settle(reply, decidedAt, input, servedBy);
    }
    const waiter = this.room.register({
      id: randomBase64url(9),
      key: roomKey(input.kind, input.key),
      ownerToken: input.ownerToken,
      ttlMs: input.ttlMs,
    });
    const reply = await waiter.enter(input.signal, () => send(waitMs, waiter.id));
    if (reply.kind === 'queued') return waiter.wait(waitMs, reply.retryAfterMs, input.signal);
    waiter.drop();
    return this.settle(reply, decidedAt, input, servedBy);
  }

  private runAcquire(input: PermitAcquireInput, waitMs: number, waiterId: string): Promise<PermitAcquireReply> {
    const { kind, key } = input;
    return this.deps.call(async () => {
      // The acquire and release of every permit write the hand-over arguments out instead of spreading
      // handOverArgs into the literal: V8 builds a literal with a spread on a much slower path.
      const raw = await this.deps.scripts.run('permitAcquire', {
        graceMs: this.deps.graceMs,
        channelPrefix: this.deps.keys.grantChannelPrefix(),
        lockName: key,
        keys: this.deps.keys.permitKeys(kind, key),
        ownerToken: input.ownerToken,
        ttlMs: input.ttlMs,
        holder: input.holder ?? '',
        weight: input.weight,
        capacity: input.capacity,
        waitMs,
        waiterId,
        instanceId: this.deps.instanceId,
        maxWaiters: this.deps.maxWaitersPerKey,
        livenessMs: this.deps.livenessMs,
      });
      return parsePermitAcquire(raw);
    });
  }

  private async settle(
    reply: PermitAcquireReply,
    decidedAt: number,
    input: PermitAcquireInput,
    servedBy: string | null,
  ): Promise<PermitAcquireOutcome> {
    switch (reply.kind) {
      case 'granted':
        await this.deps.replicated(input.key, 'grant', servedBy, () =>
          this.releasePermit(input.kind, input.key, input.ownerToken).catch(() => false),
        );
        return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
      case 'mismatch':
        return { acquired: false, reason: 'mismatch', capacity: reply.capacity, retryAfterMs: reply.retryAfterMs };
      case 'queue_full':
        throw new TooManyWaitersError('key', reply.retryAfterMs);
      default:
        return { acquired: false, reason: 'full', retryAfterMs: reply.retryAfterMs };
    }
  }

  async renewPermit(kind: PermitKind, key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const servedBy = this.deps.servedBy(key);
    const reply = await this.renewLease(kind, key, ownerToken, ttlMs);
    if (!reply.held) return { renewed: false };
    // A renewal not confirmed is not given back (see RedisStore.replicated).
    await this.deps.replicated(key, 'renewal', servedBy, async () => false);
    return renewedFrom(reply);
  }

  async requestPermitRelease(
    kind: PermitKind,
    key: string,
    fencingToken: number,
    request: ReleaseRequestInput,
  ): Promise<ReleaseRequest | null> {
    const args = {
      keys: this.deps.keys.permitKeys(kind, key),
      fencingToken,
      payload: releaseRequestPayload(request),
      channelPrefix: this.deps.keys.grantChannelPrefix(),
    };
    return this.script('permitRequestRelease', args, (raw) => parseRequestRelease('permit-request-release', raw, request));
  }

  private renewLease(kind: PermitKind, key: string, ownerToken: string, ttlMs: number) {
    const args = { keys: this.deps.keys.permitKeys(kind, key), ownerToken, ttlMs, graceMs: this.deps.graceMs };
    return this.script('permitRenew', args, (raw) => parseLease('permit-renew', raw));
  }

  releasePermit(kind: PermitKind, key: string, ownerToken: string): Promise<boolean> {
    const args = {
      graceMs: this.deps.graceMs,
      channelPrefix: this.deps.keys.grantChannelPrefix(),
      lockName: key,
      keys: this.deps.keys.permitKeys(kind, key),
      ownerToken,
    };
    return this.script('permitRelease', args, parseRelease);
  }

  async inspectPermits(kind: PermitKind, key: string): Promise<PermitState | null> {
    return (await this.inspectPermitsIndexed(kind, key)).state;
  }

  async inspectPermitsIndexed(kind: PermitKind, key: string): Promise<IndexedPermitState> {
    const reply = await this.script(
      'permitInspect',
      { keys: this.deps.keys.permitKeys(kind, key), shown: MAX_HOLDERS_SHOWN },
      parsePermitInspect,
    );
    const held = reply.held;
    if (held === null) return { state: null, index: reply.index };
    // Time left on the Redis clock the script read, as for locks (never this process's clock).
    const state = {
      capacity: held.capacity,
      waiters: held.waiters,
      holderCount: held.count,
      holders: held.leases
        .map((l) => ({ ...l, ttlRemainingMs: Math.max(0, l.expiresAtMs - held.nowMs) }))
        .sort((a, b) => a.fencingToken - b.fencingToken),
    };
    return { state, index: reply.index };
  }

  /** The scripts announce a key's changes on the channel named by its pool hash (permitChanged, _permits.lua). */
  watchPermitChanges(kind: PermitKind, key: string, onChange: () => void): Promise<() => void> {
    return this.deps.watchChannel(this.deps.keys.changeChannel(this.deps.keys.permitKeys(kind, key).pool), onChange);
  }

  async permitQueue(kind: PermitKind, key: string, limit: number): Promise<QueuedCaller[]> {
    const keys = this.deps.keys.permitKeys(kind, key);
    const args = { keys: { lock: keys.pool, queue: keys.queue, waiters: keys.waiters }, limit, layout: 'permit' } as const;
    const queued = await this.script('queue', args, parseQueue);
    return queued.map((q, i) => ({ position: i + 1, ...q }));
  }

  async forceReleasePermits(kind: PermitKind, key: string, fencingToken?: number): Promise<EvictedPermit[]> {
    const args = { ...this.handOverArgs(key), keys: this.deps.keys.permitKeys(kind, key), fencingToken };
    return this.script('permitForceRelease', args, parsePermitForceRelease);
  }

  /** Runs one script through the store's guard (RedisStore.call: every failure a StoreUnavailableError) and reads its reply. */
  private script<N extends ScriptName, T>(name: N, args: ScriptArgs<N>, parse: (raw: unknown) => T): Promise<T> {
    return this.deps.call(async () => parse(await this.deps.scripts.run(name, args)));
  }

  /** As RedisStore.list: SCAN with MATCH (never KEYS), then each key read with the inspect script. */
  async listPermits(kind: PermitKind, { prefix, limit, cursor }: PermitListQuery): Promise<PermitListPage> {
    const letter = permitKindLetter(kind);
    const page = await this.deps.scanIds(this.deps.keys.lockPattern(prefix, letter), limit, cursor, (redisKey) => {
      const id = this.deps.keys.lockIdOf(redisKey, letter);
      return id !== null && id.startsWith(prefix) ? id : null;
    });
    const next = page.nextCursor;
    const found = page.ids;
    const states = await Promise.all([...found].sort().map(async (key) => ({ key, state: await this.inspectPermits(kind, key) })));
    const entries: Array<{ id: string; state: PermitState }> = [];
    for (const { key, state } of states) if (state !== null) entries.push({ id: key, state });
    return { entries, nextCursor: next };
  }

  /** A waiter was handed a lease: renewing it confirms it is still this waiter's and restarts its full TTL. */
  private async confirm(waiter: PermitWaiter): Promise<PermitAcquireOutcome> {
    const { kind, key } = splitRoomKey(waiter.key);
    const decidedAt = performance.now();
    const servedBy = this.deps.servedBy(key);
    const reply = await this.renewLease(kind, key, waiter.ownerToken, waiter.ttlMs);
    if (!reply.held) throw new StoreUnavailableError('a lease was handed over, but it ran out before it could be delivered');
    await this.deps.replicated(key, 'grant', servedBy, () => this.releasePermit(kind, key, waiter.ownerToken).catch(() => false));
    return { acquired: true, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs, decidedAt };
  }

  private cancel(waiter: PermitWaiter) {
    const { kind, key } = splitRoomKey(waiter.key);
    const args = {
      ...this.handOverArgs(key),
      keys: this.deps.keys.permitKeys(kind, key),
      waiterId: waiter.id,
      ownerToken: waiter.ownerToken,
    };
    return this.deps.acquires.run(() => this.script('permitCancel', args, parseCancel), false);
  }

  private visit(roomKeyText: string, waiters: readonly Waiter[]) {
    const { kind, key } = splitRoomKey(roomKeyText);
    const args = { ...this.handOverArgs(key), keys: this.deps.keys.permitKeys(kind, key), livenessMs: this.deps.livenessMs, waiters };
    return this.script('permitHeartbeat', args, parsePermitHeartbeat);
  }

  private handOverArgs(key: string): HandOverArgs {
    return { graceMs: this.deps.graceMs, channelPrefix: this.deps.keys.grantChannelPrefix(), lockName: key };
  }
}

/** The wait room's key for a primitive's key: kinds apart, ids contain no space. */
function roomKey(kind: PermitKind, key: string): string {
  return `${kind} ${key}`;
}

function splitRoomKey(text: string): { kind: PermitKind; key: string } {
  const at = text.indexOf(' ');
  return { kind: text.slice(0, at) as PermitKind, key: text.slice(at + 1) };
}
