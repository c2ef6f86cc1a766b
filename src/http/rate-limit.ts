import fastifyRateLimit, { type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { performance } from 'node:perf_hooks';
import { RateLimitedError } from '../domain/errors.js';
import { accessOf } from './auth.js';
import { matchedRoute } from './matched-route.js';

/** Where allowance comes from when several instances share one limit (the Redis store: RedisRateAllowance). */
export interface AllowanceSource {
  /**
   * Hands this instance allowance for up to `wanted` requests of `rateKey`'s current window (of
   * `windowMs`, at most `max` requests in all); `granted` 0 means the window is spent. `windowLeftMs`:
   * until it ends.
   */
  handOut(
    rateKey: string,
    wanted: number,
    max: number,
    windowMs: number,
  ): Promise<{ granted: number; windowLeftMs: number; handedOut: number }>;
}

export interface RateLimitSettings {
  /** Requests one API key may make per window; 0 turns rate limiting off. */
  readonly max: number;
  readonly windowMs: number;
  /**
   * Shared allowance, so N instances allow `max` per key in total rather than N x max. Absent: each
   * instance counts on its own. (On a Redis Cluster each caller's window is one key updated by a one-key
   * script, so it works unchanged; the windows spread over the masters.)
   */
  readonly allowance?: AllowanceSource;
}

/**
 * A batch is at most 1/8 of what is left in the window: while much is left, an instance asks the
 * shared store rarely; near the limit batches shrink to one request, so allowance an instance holds but
 * does not use (and so refuses nobody else with) stay a small part of the window.
 */
const BATCH_SHARE_OF_REMAINING = 8;
/**
 * Allowance for 1,000 requests per batch at most: at a few thousand requests a second per key, one shared-store call
 * every few hundred milliseconds, and an instance that dies takes at most this much unused allowance
 * of one key's window with it.
 */
const BATCH_MAX = 1000;
/** Past this many callers' windows in memory, ended ones are dropped (open mode counts by address). */
const SWEEP_ABOVE_WINDOWS = 10_000;

interface LocalWindow {
  /** Allowance (requests) this instance holds and has not spent. */
  left: number;
  /** Allowance handed out in this window (all instances, in requests) as of the last batch. */
  handedOut: number;
  /** performance.now() when the window ends. */
  endsAt: number;
  /** The batch being fetched, if any: callers that find no allowance wait for it instead of asking again. */
  fetching?: Promise<void>;
}

type StoreResult = { current: number; ttl: number };

/**
 * A @fastify/rate-limit store that counts in memory and takes allowance from the shared store in
 * batches (see docs/performance.md#rate-limit), so a counted request costs no Redis round trip.
 *
 * Exactness: allowance is taken from the shared window before any request spends it, so all instances
 * together never let more than `max` requests of one caller through in one window. They may refuse a
 * few early: allowance another instance holds unspent when the window runs dry are not moved (at most
 * 1/8 of what was left when that instance took its last batch). An instance that crashes loses its
 * unspent allowance for the rest of that window: at most BATCH_MAX fewer requests for that caller
 * until the window ends, never more.
 */
export class BatchedRateStore {
  private readonly windows = new Map<string, LocalWindow>();

  constructor(private readonly source: AllowanceSource) {}

  incr(rateKey: string, done: (err: Error | null, result?: StoreResult) => void, windowMs: number, max: number): void {
    const counted = this.takeHeld(rateKey);
    if (counted !== undefined) {
      done(null, counted);
      return;
    }
    this.take(rateKey, windowMs, max).then(
      (result) => done(null, result),
      (err: unknown) => done(err as Error),
    );
  }

  /**
   * Spends allowance this instance holds for `rateKey`, without waiting: the count as incr reports it,
   * or undefined when none is held here (incr then takes a batch from the shared store).
   */
  takeHeld(rateKey: string): StoreResult | undefined {
    const window = this.windows.get(rateKey);
    const now = performance.now();
    if (window === undefined || window.endsAt <= now || window.left <= 0) return undefined;
    window.left--;
    return { current: window.handedOut - window.left, ttl: Math.ceil(window.endsAt - now) };
  }

  /** The plugin asks each route's store for a child; every route shares one count per caller. */
  child(): this {
    return this;
  }

  private async take(rateKey: string, windowMs: number, max: number): Promise<StoreResult> {
    for (;;) {
      let window = this.windows.get(rateKey);
      const now = performance.now();
      if (window && window.endsAt <= now) {
        this.windows.delete(rateKey);
        window = undefined;
      }
      if (window?.fetching) {
        await window.fetching;
        continue;
      }
      if (window && window.left > 0) {
        window.left--;
        return { current: window.handedOut - window.left, ttl: Math.ceil(window.endsAt - now) };
      }
      // The window is spent here and in the shared store: refuse without asking again until it ends.
      if (window && window.handedOut >= max) return { current: max + 1, ttl: Math.ceil(window.endsAt - now) };
      const remaining = max - (window?.handedOut ?? 0);
      const wanted = Math.max(1, Math.min(BATCH_MAX, Math.floor(remaining / BATCH_SHARE_OF_REMAINING)));
      const fresh: LocalWindow = window ?? { left: 0, handedOut: 0, endsAt: now + windowMs };
      fresh.fetching = this.source.handOut(rateKey, wanted, max, windowMs).then(
        (batch) => {
          fresh.left += batch.granted;
          fresh.handedOut = batch.handedOut;
          // A window that is spent is marked so: handedOut may lag other instances' batches.
          if (batch.granted === 0) fresh.handedOut = Math.max(max, batch.handedOut);
          fresh.endsAt = performance.now() + batch.windowLeftMs;
        },
        (err: unknown) => {
          this.windows.delete(rateKey);
          throw err;
        },
      );
      if (!window) {
        if (this.windows.size >= SWEEP_ABOVE_WINDOWS) this.sweep(now);
        this.windows.set(rateKey, fresh);
      }
      try {
        await fresh.fetching;
      } finally {
        delete fresh.fetching;
      }
    }
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) if (window.endsAt <= now && !window.fetching) this.windows.delete(key);
  }
}

/** The store class the plugin constructs; `made` is told of the instance (the hook below spends its allowance too). */
function batchedStoreClass(source: AllowanceSource, made: (store: BatchedRateStore) => void): FastifyRateLimitStoreCtor {
  return class extends BatchedRateStore {
    constructor() {
      super(source);
      made(this);
    }
  };
}

/** Authenticated callers are counted by key id (whatever address they call from); open mode by address. */
function rateKey(request: FastifyRequest): string {
  const principal = request.principal;
  return principal && !principal.anonymous ? `key:${principal.keyId}` : `ip:${request.ip}`;
}

/**
 * Per-key request rate with @fastify/rate-limit. It counts acquire, inspect and the admin routes. Renew
 * and release opt out in their route config (`rateLimit: false`): refusing one would take a lease away
 * from a caller whose only fault is sharing a key with a noisy poller (so how often one lease is renewed
 * is not bounded here: docs/limits.md). Public routes are never counted either. It must be
 * registered after the auth hook and before the routes: it adds its own onRequest hook to each route
 * registered after it, and route hooks run after the root's, so it sees the authenticated principal and
 * never counts requests refused with 401.
 * With shared allowance the count is kept in memory and reconciled in batches (BatchedRateStore), so a
 * counted request costs no store round trip. `skipOnError`: if the shared store fails, requests go
 * through uncounted rather than failing; the lock calls themselves then answer from the lock store
 * (503 if it is the same Redis and it is down).
 */
export async function registerRateLimit(app: FastifyInstance, settings: RateLimitSettings): Promise<void> {
  if (settings.max <= 0) return;
  // One holder object, decorated on the root, so the routes' plugins (child instances) share it.
  const charges: FailureCharges = { charge: undefined, whileStoreFails: new LocalFailureCount(settings.max, settings.windowMs) };
  app.decorate(FAILURE_CHARGES, charges);
  app.addHook('onReady', function () {
    charges.charge = this.createRateLimit();
  });
  // The plugin constructs the store class it is given.
  let batched: BatchedRateStore | undefined;
  const store = settings.allowance ? batchedStoreClass(settings.allowance, (made) => (batched = made)) : undefined;
  await app.register(fastifyRateLimit, {
    // Not a hook per route from the plugin: the one hook below counts every route that is counted.
    global: false,
    max: settings.max,
    timeWindow: settings.windowMs,
    keyGenerator: rateKey,
    allowList: (request) => accessOf(request) === 'public',
    skipOnError: true,
    ...(store ? { store } : {}),
    errorResponseBuilder: (_request, context) => new RateLimitedError(context.ttl),
  });
  // The plugin's own check (an async function: a few promises per request), for every request the
  // fast path below does not answer.
  const check = app.rateLimit();
  const max = settings.max;
  // Callback style, and a request whose caller holds allowance here (nearly all, with the shared
  // store) is counted without a promise: the same count and headers as the plugin's check.
  app.addHook('onRequest', function (request, reply, done) {
    // Not counted: renew and release (their routes opt out), public routes, and requests no route
    // matched (the plugin counted only the routes registered after it).
    const route = matchedRoute(request);
    if (route.url === undefined || route.config.rateLimit === false || accessOf(request) === 'public') {
      done();
      return;
    }
    const counted = batched?.takeHeld(rateKey(request));
    if (counted !== undefined && counted.current <= max) {
      reply.header('x-ratelimit-limit', max);
      reply.header('x-ratelimit-remaining', max - counted.current);
      reply.header('x-ratelimit-reset', Math.ceil(counted.ttl / 1000));
      done();
      return;
    }
    check.call(this, request, reply).then(
      () => done(),
      (err: unknown) => done(err as Error),
    );
  });
}

/** The decorator holding the call that counts one request of the caller (the plugin's own counter). */
const FAILURE_CHARGES = 'failedOwnershipCharges';

interface FailureCharges {
  charge:
    | ((request: FastifyRequest) => Promise<{ isExceeded?: boolean; ttl?: number; isAllowed: boolean; remaining?: number; max?: number }>)
    | undefined;
  readonly whileStoreFails: LocalFailureCount;
}

/** Past this many callers' windows, ended ones are dropped (a caller in open mode is an address). */
const FAILURE_COUNT_SWEEP_ABOVE = 10_000;

/**
 * Failed ownership attempts counted by this instance alone, for while the shared rate store fails: a
 * caller flooding made-up tokens is still refused past its limit (per instance then, not in total),
 * where `skipOnError` would let every failure through uncounted. Only failures are counted here, so a
 * correct renewal or release is never refused by it.
 */
class LocalFailureCount {
  private readonly windows = new Map<string, { count: number; endsAt: number }>();

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  charge(rateKey: string): { isExceeded: boolean; ttl: number } {
    const now = performance.now();
    let window = this.windows.get(rateKey);
    if (window === undefined || window.endsAt <= now) {
      if (window === undefined && this.windows.size >= FAILURE_COUNT_SWEEP_ABOVE)
        for (const [key, w] of this.windows) if (w.endsAt <= now) this.windows.delete(key);
      window = { count: 0, endsAt: now + this.windowMs };
      this.windows.set(rateKey, window);
    }
    window.count++;
    return { isExceeded: window.count > this.max, ttl: Math.ceil(window.endsAt - now) };
  }
}

/**
 * A renew or release refused with not_owner (a token that holds nothing) counts against the caller's
 * rate limit, though renew and release are otherwise never counted: each one is a store call, and
 * made-up tokens (900 of them in 5 s under a limit of 20 a minute) would otherwise be free to send
 * without end. A correct renewal or release never gets here, so it is never counted nor refused.
 * Returns the error to answer instead (429 rate_limited) once the caller is over its limit, else
 * undefined (answer not_owner). While the shared rate store fails, failures are counted on this
 * instance (LocalFailureCount): the attacker's counting fails closed, a real holder is not touched.
 */
export async function chargeFailedOwnership(request: FastifyRequest): Promise<RateLimitedError | undefined> {
  const server = request.server as FastifyInstance & { [FAILURE_CHARGES]?: FailureCharges };
  const charges = server[FAILURE_CHARGES];
  if (charges?.charge === undefined || accessOf(request) === 'public') return undefined;
  const counted = await charges.charge(request);
  // The plugin answers a store error (skipOnError) as a count of 0: every real count is at least 1,
  // so nothing left spent means the shared store failed, and this instance counts on its own.
  const storeFailed = counted.isAllowed === false && counted.max !== undefined && counted.remaining === counted.max;
  const verdict = storeFailed ? charges.whileStoreFails.charge(rateKey(request)) : counted;
  return verdict.isExceeded === true ? new RateLimitedError(verdict.ttl ?? 1000) : undefined;
}
