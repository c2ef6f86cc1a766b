import createClient, { type Client } from 'openapi-fetch';
import type { z } from 'zod';
import {
  errorFromResponse,
  InvalidRequestError,
  InvalidResponseError,
  LockHeldError,
  noAnswer,
  NotOwnerError,
  RedirectError,
  type KeyholderError,
} from './errors.js';
import { Lease, type LeaseOptions, type LeaseTransport } from './lease.js';
import type { components, paths } from './openapi-types.js';
import * as answers from './schemas.js';
import { type BackoffOptions, monotonicNow, pause, type RetryEvent, withRetries } from './retry.js';

export type LockGrant = components['schemas']['LockGrant'];
export type LockRenewal = components['schemas']['LockRenewal'];
export type LockStatus = components['schemas']['LockStatus'];
export type LockList = components['schemas']['LockList'];
export type ForceRelease = components['schemas']['ForceRelease'];
export type PermitForceRelease = components['schemas']['PermitForceRelease'];
/** The weighted primitives (a key of capacity N): their admin calls answer with every lease evicted. */
export type PermitPrimitive = 'semaphores' | 'rwlocks';
export type ReleaseRequested = components['schemas']['ReleaseRequested'];
export type ReleaseRequestAnswer = components['schemas']['ReleaseRequestAnswer'];
export type QueuedCaller = components['schemas']['QueuedCaller'];

type OtelApi = typeof import('@opentelemetry/api');
let otelApi: Promise<OtelApi | undefined> | undefined;

/**
 * @opentelemetry/api when the application can import it, else undefined; looked up once, on first use, so
 * that a process that never sends a request (or runs without OpenTelemetry) loads nothing of it. The API
 * keeps its state (context manager, propagator, tracer provider) in one global per major version, so the
 * copy found here sees what the application registered with its own.
 */
function loadOtel(): Promise<OtelApi | undefined> {
  otelApi ??= import('@opentelemetry/api').then(
    (api) => api,
    () => undefined,
  );
  return otelApi;
}

/** Writes propagated fields into a Request's headers (the API's default setter writes object properties). */
const headerSetter = { set: (headers: Headers, name: string, value: string) => headers.set(name, value) };
export type KeyHistory = components['schemas']['KeyHistory'];
export type HistoryEvent = components['schemas']['HistoryEvent'];

export interface KeyholderClientOptions {
  /** Where the server listens, e.g. http://127.0.0.1:3000. */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`; leave out for a server running open. */
  readonly apiKey?: string | undefined;
  /** Longest wait for one answer (a waiting acquire adds its waitMs). 10 s: far above a healthy round trip. */
  readonly requestTimeoutMs?: number;
  /**
   * How long one call keeps retrying 503, 429 and lost connections before giving up (a waiting acquire adds
   * its waitMs). 15 s: rides out a store restart or failover, short enough that a caller learns of an outage.
   */
  readonly retryBudgetMs?: number;
  /** Backoff between retries: 100 ms doubling up to 2 s, with jitter; Retry-After is always honoured. */
  readonly backoff?: Partial<BackoffOptions>;
  /** Called before each retry (for logs and metrics). */
  readonly onRetry?: (event: RetryEvent & { readonly operation: string }) => void;
  /**
   * A fetch to use instead of the global one. It is handed requests with `redirect: 'manual'`; a response
   * that followed a redirect anyway (`response.redirected`) is refused like a 3xx.
   */
  readonly fetch?: (input: Request, init?: RequestInit) => Promise<Response>;
  /**
   * The undici dispatcher for Node's global fetch: to trust a private CA, pass
   * `new Agent({ connect: { ca: readFileSync('ca.pem') } })` from the `undici` package. (Node 20's fetch
   * takes no `ca` of its own; NODE_EXTRA_CA_CERTS also works, for the whole process.) Typed loosely: the
   * `undici` package's types and the ones Node's fetch is declared with differ by version, not in use.
   */
  readonly dispatcher?: object;
  /**
   * Sends the caller's trace context with every request (default true): when @opentelemetry/api can be
   * imported, each request carries what the application's registered propagator injects from the context
   * active when the call was made (W3C `traceparent` with the SDK's defaults), so the server's spans join
   * the caller's trace. Nothing is sent without a registered propagator or outside a span. Renewals carry
   * the context of the acquire that started them.
   */
  readonly propagateTrace?: boolean;
  /**
   * Extra headers for every request, asked for as each one is sent (retries and renewals included), set
   * after the propagated trace context (so they may replace it).
   */
  readonly headers?: () => Readonly<Record<string, string>> | undefined;
  /**
   * withLock runs in a span of its own (default false), `keyholder.hold`, from before the acquire to after
   * the release, with the key, holder and fencing token as attributes and an error status when `fn` throws
   * or the lease is lost. The acquire, the renewals and the release are sent inside it, so the server's
   * spans of this hold are its children. Needs @opentelemetry/api and a registered tracer provider
   * (otherwise the span records nothing).
   */
  readonly holdSpans?: boolean;
  /**
   * Runs withLock's hold (from the grant to the release, `fn` inside) through this, e.g. in a span of the
   * application's own:
   * `wrapHold: (key, hold) => tracer.startActiveSpan('hold ' + key, (span) => hold().finally(() => span.end()))`.
   * The release is sent inside it, so it joins the hold's trace.
   */
  readonly wrapHold?: <T>(key: string, hold: () => Promise<T>) => Promise<T>;
}

export interface AcquireOptions extends LeaseOptions {
  /** Lease length. The server bounds it (by default 100 ms to 1 h). */
  readonly ttlMs: number;
  /** If the lock is held, wait up to this long in the server's fair queue (0 or absent: fail at once). */
  readonly waitMs?: number;
  /** A label others see (inspect, ls), e.g. a worker name. */
  readonly holder?: string;
  /**
   * Makes retries of this acquire safe: while the grant it made is live, the same key returns that same
   * grant instead of 409. A fresh random one is used when absent; pass your own to retry across processes.
   */
  readonly idempotencyKey?: string;
  /** Give up (throw the signal's reason) when this aborts. */
  readonly signal?: AbortSignal;
  /** Overrides the client's retryBudgetMs for this call. */
  readonly retryBudgetMs?: number;
}

export interface ObserveOptions {
  /**
   * Longest wait of one blocking query; it is asked again after. By default 30 s, or the server's
   * LOCK_MAX_WAIT_MS when that is lower. One given here that is above the server's bound is refused
   * (InvalidRequestError), never shortened.
   */
  readonly waitMs?: number;
  /** Ends the observation (the iterator returns). */
  readonly signal?: AbortSignal;
}

export interface CampaignOptions extends Omit<AcquireOptions, 'waitMs' | 'idempotencyKey'> {
  /**
   * Longest wait of one turn in the lock's queue; the campaign queues again after it. By default 30 s, or
   * the server's LOCK_MAX_WAIT_MS when that is lower. One given here that is above the server's bound is
   * refused (InvalidRequestError), never shortened.
   */
  readonly waitMs?: number;
}

interface CallOptions {
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal | undefined;
  readonly deadlineAt?: number;
}

type Sent<T> = Promise<{ data?: T; error?: unknown; response: Response }>;

/**
 * A keyholder client: typed calls over fetch (types generated from openapi.yaml), retries of 503/429 and
 * lost connections, and leases that renew themselves and say through `lease.signal` when to stop.
 */
export class KeyholderClient {
  private readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly retryBudgetMs: number;
  private readonly backoff: BackoffOptions;
  private readonly onRetry: KeyholderClientOptions['onRetry'];
  private readonly wrapHold: KeyholderClientOptions['wrapHold'];
  private readonly holdSpans: boolean;

  constructor(options: KeyholderClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.retryBudgetMs = options.retryBudgetMs ?? 15_000;
    this.backoff = { baseDelayMs: 100, maxDelayMs: 2_000, ...options.backoff };
    this.onRetry = options.onRetry;
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
      // Never follow a redirect: on a 307/308 fetch resends the body (a renew's or release's owner token) to
      // the new origin, over plain http after https too, and whatever answers there would be read as the
      // answer. (Node's fetch drops Authorization across origins; a custom fetch may not.)
      redirect: 'manual',
      ...(options.dispatcher ? { requestInitExt: { dispatcher: options.dispatcher } } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.wrapHold = options.wrapHold;
    this.holdSpans = options.holdSpans ?? false;
    if (options.propagateTrace ?? true) {
      this.api.use({
        // Runs in the caller's async context (retries and renewals in the one that started them).
        async onRequest({ request }) {
          const otel = await loadOtel();
          otel?.propagation.inject(otel.context.active(), request.headers, headerSetter);
          return request;
        },
      });
    }
    const extraHeaders = options.headers;
    if (extraHeaders) {
      this.api.use({
        onRequest({ request }) {
          for (const [name, value] of Object.entries(extraHeaders() ?? {})) request.headers.set(name, value);
          return request;
        },
      });
    }
  }

  /**
   * Takes the lock and returns a Lease that renews itself at about a third of its TTL until released.
   * Throws LockHeldError (with retryAfterMs) when it is held past waitMs.
   */
  async acquire(key: string, options: AcquireOptions): Promise<Lease> {
    const sentAt = monotonicNow();
    const grant = await this.acquireGrant(key, options);
    const lease = new Lease(this.leaseTransport(), grant, sentAt, options);
    // With the caller's own Idempotency-Key the grant may be an earlier call's lease, replayed as it
    // was (its end unchanged): its age is unknown, so it is renewed before it is handed out.
    await lease.start(options.idempotencyKey !== undefined);
    return lease;
  }

  /**
   * Takes the lock, runs `fn` with the lease, and releases it whatever happens; `fn`'s error is rethrown.
   * When the lease was lost while `fn` ran (lease.signal aborted), this throws the LeaseLostError even if
   * `fn` returned: its work may have run without the lock, and the caller should know.
   */
  async withLock<T>(key: string, options: AcquireOptions, fn: (lease: Lease) => Promise<T> | T): Promise<T> {
    const otel = this.holdSpans ? await loadOtel() : undefined;
    if (!otel) return this.lockAndRun(key, options, fn);
    const attributes = { 'keyholder.key': key, ...(options.holder === undefined ? {} : { 'keyholder.holder': options.holder }) };
    return otel.trace
      .getTracer('keyholder-client')
      .startActiveSpan('keyholder.hold', { kind: otel.SpanKind.INTERNAL, attributes }, async (span) => {
        try {
          return await this.lockAndRun(key, options, fn, (lease) => span.setAttribute('keyholder.fencing_token', lease.fencingToken));
        } catch (err) {
          if (err instanceof Error) span.recordException(err);
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: err instanceof Error ? err.name : String(err) });
          throw err;
        } finally {
          span.end();
        }
      });
  }

  private async lockAndRun<T>(
    key: string,
    options: AcquireOptions,
    fn: (lease: Lease) => Promise<T> | T,
    granted?: (lease: Lease) => void,
  ): Promise<T> {
    const lease = await this.acquire(key, options);
    granted?.(lease);
    let held = false;
    const hold = async (): Promise<T> => {
      held = true;
      let result: T;
      try {
        result = await fn(lease);
      } catch (err) {
        await lease.release().catch(() => undefined);
        throw err;
      }
      await lease.release();
      if (lease.signal.aborted) throw lease.signal.reason;
      return result;
    };
    if (!this.wrapHold) return hold();
    try {
      return await this.wrapHold(key, hold);
    } finally {
      // A wrapHold that never ran the hold (it failed first) left the lease renewing itself for as long as
      // the process lived: it is given back here instead.
      if (!held) await lease.release().catch(() => undefined);
    }
  }

  /** One acquire, retried with the same Idempotency-Key; the grant without a Lease around it (no renewing). */
  async acquireGrant(key: string, options: Omit<AcquireOptions, keyof LeaseOptions>): Promise<LockGrant> {
    const started = monotonicNow();
    const waitMs = options.waitMs ?? 0;
    const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    const grant = await this.call(
      'acquire',
      answers.lockGrant,
      (signal) => {
        // A retry waits only for what is left of the caller's waitMs.
        const waitLeftMs = Math.max(0, Math.floor(waitMs - (monotonicNow() - started)));
        return this.api.POST('/v1/locks/{key}/acquire', {
          params: { path: { key }, header: { 'Idempotency-Key': idempotencyKey } },
          body: {
            ttlMs: options.ttlMs,
            ...(options.holder === undefined ? {} : { holder: options.holder }),
            ...(waitMs > 0 ? { waitMs: waitLeftMs } : {}),
          },
          signal,
        });
      },
      {
        timeoutMs: this.requestTimeoutMs + waitMs,
        signal: options.signal,
        deadlineAt: started + waitMs + (options.retryBudgetMs ?? this.retryBudgetMs),
      },
    );
    // Renewed and released under the key it names, a grant of another key would hold that one.
    if (grant.key !== key) throw invalidAnswer('acquire', 200, `a grant of ${JSON.stringify(grant.key)}, asked for ${JSON.stringify(key)}`);
    return noLongerThanAsked('acquire', grant, options.ttlMs);
  }

  /** Extends a lease to end ttlMs from now. Throws NotOwnerError when the token no longer holds it. */
  async renew(key: string, ownerToken: string, ttlMs: number, options: CallOptions = {}): Promise<LockRenewal> {
    const renewal = await this.call(
      'renew',
      answers.lockRenewal,
      (signal) => this.api.POST('/v1/locks/{key}/renew', { params: { path: { key } }, body: { ownerToken, ttlMs }, signal }),
      options,
    );
    return noLongerThanAsked('renew', renewal, ttlMs);
  }

  /** Gives the lock back. Throws NotOwnerError when the token no longer holds it. */
  async release(key: string, ownerToken: string, options: CallOptions = {}): Promise<void> {
    await this.call(
      'release',
      answers.lockRelease,
      (signal) => this.api.POST('/v1/locks/{key}/release', { params: { path: { key } }, body: { ownerToken }, signal }),
      options,
    );
  }

  /**
   * Who holds the lock right now (never the owner token), with its watch index. With `index` and `waitMs`,
   * a blocking query: answers when the index differs from `index`, at the latest after `waitMs`. With
   * `queue: true` (not with `index`), a held lock's answer also lists the callers queued for it, head first
   * (position, holder label, waiting since; at most 100).
   */
  async inspect(
    key: string,
    options: CallOptions & { readonly index?: number; readonly waitMs?: number; readonly queue?: boolean } = {},
  ): Promise<LockStatus> {
    const { index, waitMs = 0, queue, ...call } = options;
    const query = { ...(index === undefined ? {} : { index, waitMs }), ...(queue ? { queue: 'true' } : {}) };
    return this.call(
      'inspect',
      answers.lockStatus,
      (signal) => this.api.GET('/v1/locks/{key}', { params: { path: { key }, query }, signal }),
      {
        ...call,
        timeoutMs: (call.timeoutMs ?? this.requestTimeoutMs) + waitMs,
        // The retry budget is for retries, not for the wait asked for (as an acquire's): a blocking query
        // that waited past the budget and then met a 503 (its instance shutting down) was not retried.
        deadlineAt: call.deadlineAt ?? (index === undefined ? undefined : monotonicNow() + waitMs + this.retryBudgetMs),
      },
    );
  }

  /**
   * The lock's state now and after every change (grant, release, expiry, force release, hand-over), as
   * blocking queries: no polling; the server answers the moment the lock changes. For followers in a
   * leader election: `for await (const s of kh.observe('leader')) console.log(s.held ? s.holder : 'vacant')`.
   * Changes in quick succession may be seen as one (the latest state). Errors (after the client's retries)
   * end the iteration by throwing.
   */
  async *observe(key: string, options: ObserveOptions = {}): AsyncGenerator<LockStatus, void, undefined> {
    let waitMs = options.waitMs ?? DEFAULT_HELPER_WAIT_MS;
    let index: number | undefined;
    while (!options.signal?.aborted) {
      let status: LockStatus;
      try {
        status = await this.inspect(key, { index, waitMs, signal: options.signal });
      } catch (err) {
        if (options.signal?.aborted) return;
        const bound = options.waitMs === undefined ? serverWaitBound(err, waitMs) : undefined;
        if (bound === undefined) throw err;
        waitMs = bound;
        continue;
      }
      // Compare for inequality only: the index may step down (a free key's state forgotten).
      if (status.index !== index) {
        index = status.index;
        yield status;
      } else if (waitMs === 0) {
        // A server that takes no wait answers at once: ask again after a pause, not in a tight loop.
        try {
          await pause(NO_WAIT_POLL_MS, options.signal);
        } catch {
          return;
        }
      }
    }
  }

  /**
   * Leader election: resolves with a self-renewing Lease once this caller leads. Candidates wait in the
   * lock's FIFO queue (`waitMs` per turn, queued again while the signal allows), so the lock passes to the
   * next candidate the moment the leader releases it or its lease expires. Lead while `lease.signal` is not
   * aborted, and send `lease.fencingToken` with every write; followers use observe() to learn the leader.
   */
  async campaign(key: string, options: CampaignOptions): Promise<Lease> {
    let waitMs = options.waitMs ?? DEFAULT_HELPER_WAIT_MS;
    for (;;) {
      options.signal?.throwIfAborted();
      try {
        return await this.acquire(key, { ...options, waitMs });
      } catch (err) {
        const bound = options.waitMs === undefined ? serverWaitBound(err, waitMs) : undefined;
        if (bound !== undefined) {
          waitMs = bound;
          continue;
        }
        if (!(err instanceof LockHeldError)) throw err;
        // The turn ran out with someone else still leading: queue again. A turn that did not wait in the
        // queue (waitMs 0) asks again when the server says the lock may be free, not at once: a follower
        // would otherwise send a request per round trip for as long as the leader holds.
        if (waitMs === 0) await pause(Math.max(err.retryAfterMs ?? 0, 10), options.signal);
      }
    }
  }

  /** One page of held locks (needs an `admin` key when the server checks keys). */
  async list(
    query: { namespace?: string; prefix?: string; limit?: number; cursor?: string } = {},
    options: CallOptions = {},
  ): Promise<LockList> {
    return this.call('list', answers.lockList, (signal) => this.api.GET('/v1/locks', { params: { query }, signal }), options);
  }

  /**
   * Frees a key whoever holds it (needs an `admin` key when the server checks keys): a lock by default, a
   * semaphore's or a read/write lock's leases with `primitive` (all of them, answered in `evicted`). With
   * `fencingToken`, only the lease with that token is evicted: if no lease of the key has it now (another
   * holds the lock, or that permit ended), nothing changes and HolderChangedError (409 holder_changed) is thrown.
   */
  async forceRelease(
    key: string,
    namespace: string,
    options?: CallOptions & { readonly fencingToken?: number; readonly primitive?: 'locks' },
  ): Promise<ForceRelease>;
  async forceRelease(
    key: string,
    namespace: string,
    options: CallOptions & { readonly fencingToken?: number; readonly primitive: PermitPrimitive },
  ): Promise<PermitForceRelease>;
  async forceRelease(
    key: string,
    namespace: string,
    options: CallOptions & { readonly fencingToken?: number; readonly primitive?: 'locks' | PermitPrimitive } = {},
  ): Promise<ForceRelease | PermitForceRelease> {
    const { fencingToken, primitive = 'locks', ...call } = options;
    const query = fencingToken === undefined ? { namespace } : { namespace, fencingToken };
    const params = { params: { path: { key }, query } };
    if (primitive === 'locks') {
      return this.call('forceRelease', answers.forceRelease, (signal) => this.api.DELETE('/v1/locks/{key}', { ...params, signal }), call);
    }
    return this.call(
      'forceRelease',
      answers.permitForceRelease,
      (signal) =>
        primitive === 'semaphores'
          ? this.api.DELETE('/v1/semaphores/{key}', { ...params, signal })
          : this.api.DELETE('/v1/rwlocks/{key}', { ...params, signal }),
      call,
    );
  }

  /**
   * Asks the holder of the lease with `fencingToken` to let go, without evicting it (needs an `admin` key
   * when the server checks keys): a lock's lease by default, a semaphore's or a read/write lock's with
   * `primitive`. Its renewals carry the request from then on (a Lease of this client calls its
   * onReleaseRequested listeners). If no lease of the key has that token now, nothing is asked and
   * HolderChangedError (409 holder_changed) is thrown; NotFoundError when nobody holds it.
   */
  async requestRelease(
    key: string,
    namespace: string,
    fencingToken: number,
    options: CallOptions & { readonly reason?: string; readonly primitive?: 'locks' | PermitPrimitive } = {},
  ): Promise<ReleaseRequestAnswer> {
    const { reason, primitive = 'locks', ...call } = options;
    const body = reason === undefined ? { fencingToken } : { fencingToken, reason };
    const params = { params: { path: { key }, query: { namespace } }, body };
    return this.call(
      'requestRelease',
      answers.releaseRequestAnswer,
      (signal) =>
        primitive === 'semaphores'
          ? this.api.POST('/v1/semaphores/{key}/release-request', { ...params, signal })
          : primitive === 'rwlocks'
            ? this.api.POST('/v1/rwlocks/{key}/release-request', { ...params, signal })
            : this.api.POST('/v1/locks/{key}/release-request', { ...params, signal }),
      call,
    );
  }

  /**
   * The lock's recent lease events, oldest first: granted, handed_over, renewed, release_requested (with
   * `by` and `reason`), released, expired, force_released (with `by`), lock_delay, with holder, fencing
   * token, times, waitedMs and heldMs. `since` and `until` (Date or ISO string) keep the events in the
   * range and every event of a lease live in it. `primitive` reads a semaphore's or read/write lock's key
   * instead. With `namespace`, any namespace's key (needs an `admin` key when the server checks keys).
   */
  async history(
    key: string,
    options: CallOptions & {
      readonly since?: Date | string;
      readonly until?: Date | string;
      readonly limit?: number;
      readonly primitive?: 'locks' | 'semaphores' | 'rwlocks';
      readonly namespace?: string;
    } = {},
  ): Promise<KeyHistory> {
    const { since, until, limit, primitive = 'locks', namespace, ...call } = options;
    const at = (t: Date | string | undefined) => (t instanceof Date ? t.toISOString() : t);
    const query = {
      ...(since !== undefined ? { since: at(since) } : {}),
      ...(until !== undefined ? { until: at(until) } : {}),
      ...(limit !== undefined ? { limit } : {}),
    };
    return this.call(
      'history',
      answers.keyHistory,
      (signal) =>
        namespace !== undefined
          ? this.api.GET('/v1/history/{primitive}/{key}', { params: { path: { primitive, key }, query: { ...query, namespace } }, signal })
          : primitive === 'semaphores'
            ? this.api.GET('/v1/semaphores/{key}/history', { params: { path: { key }, query }, signal })
            : primitive === 'rwlocks'
              ? this.api.GET('/v1/rwlocks/{key}/history', { params: { path: { key }, query }, signal })
              : this.api.GET('/v1/locks/{key}/history', { params: { path: { key }, query }, signal }),
      call,
    );
  }

  /** What a Lease needs from the client: single renew attempts (it schedules its own), and a release. */
  private leaseTransport(): LeaseTransport {
    return {
      backoff: this.backoff,
      // One attempt (deadlineAt 0) of the public renew, its answer checked the same way.
      renewOnce: (key, ownerToken, ttlMs, signal, timeoutMs) =>
        this.renew(key, ownerToken, ttlMs, { signal, timeoutMs: Math.min(timeoutMs, this.requestTimeoutMs), deadlineAt: 0 }),
      release: async (key, ownerToken, deadlineAt) => {
        try {
          await this.release(key, ownerToken, { deadlineAt });
        } catch (err) {
          // Already not ours (expired, force-released, or an earlier attempt's answer was lost): nothing to give back.
          if (err instanceof NotOwnerError) return;
          throw err;
        }
      },
    };
  }

  /**
   * One operation: each attempt bounded by a timeout, retried while retryable and before the deadline.
   * Only a 200 whose body parses against `answer` is taken as the answer.
   */
  private async call<T>(operation: string, answer: z.ZodType<T>, send: (signal: AbortSignal) => Sent<T>, options: CallOptions): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    const userSignal = options.signal;
    return withRetries(
      async () => {
        userSignal?.throwIfAborted();
        const timeout = AbortSignal.timeout(Math.max(1, Math.ceil(timeoutMs)));
        const signal = userSignal ? AbortSignal.any([userSignal, timeout]) : timeout;
        let result: Awaited<Sent<T>>;
        try {
          result = await send(signal);
        } catch (err) {
          userSignal?.throwIfAborted();
          // A 200 whose body is not JSON: an answer came, but not keyholder's.
          if (err instanceof SyntaxError) throw invalidAnswer(operation, 200, err.message, err);
          throw noAnswer(this.baseUrl, err);
        }
        return this.accept(operation, answer, result);
      },
      {
        ...this.backoff,
        deadlineAt: options.deadlineAt ?? monotonicNow() + this.retryBudgetMs,
        signal: userSignal,
        onRetry: this.onRetry ? (event) => this.onRetry?.({ ...event, operation }) : undefined,
      },
    );
  }

  /** The answer's body, if it is one keyholder gives: a 200 that parses; a 3xx or another 2xx is refused. */
  private accept<T>(operation: string, answer: z.ZodType<T>, result: Awaited<Sent<T>>): T {
    const { response } = result;
    if (response.redirected || (response.status >= 300 && response.status < 400)) {
      const location = response.headers.get('location');
      throw new RedirectError(
        `${operation}: the server answered ${response.status} to ${location ?? '(no location)'}; redirects are not followed`,
        response.status,
        location,
      );
    }
    if (response.status === 200) {
      const parsed = answer.safeParse(result.data);
      if (parsed.success) return parsed.data;
      throw invalidAnswer(operation, 200, parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '));
    }
    if (response.ok) throw invalidAnswer(operation, response.status, 'keyholder answers 200 on success');
    throw errorFromResponse(response, result.error);
  }
}

/** The wait of one request of observe() and campaign() when the caller gives none (the server's bound if lower). */
const DEFAULT_HELPER_WAIT_MS = 30_000;

/** How often observe() asks again when the server takes no wait at all (LOCK_MAX_WAIT_MS 0). */
const NO_WAIT_POLL_MS = 1_000;

/**
 * The server's bound on waitMs when `err` is its refusal of a wait above it (the problem's maxWaitMs) and
 * that bound is below `askedMs`; else undefined. Only for a wait the client chose: a caller's own wait
 * is never shortened behind its back.
 */
function serverWaitBound(err: unknown, askedMs: number): number | undefined {
  if (!(err instanceof InvalidRequestError) || err.code !== 'invalid_request') return undefined;
  const bound = err.problem?.maxWaitMs;
  return typeof bound === 'number' && Number.isInteger(bound) && bound >= 0 && bound < askedMs ? bound : undefined;
}

/**
 * A grant or renewal longer than the TTL asked is no keyholder answer (the server grants exactly the TTL
 * asked, or refuses): trusted, the lease would count its safe deadline, and ask its renewals, from it.
 */
function noLongerThanAsked<T extends { readonly ttlMs: number }>(operation: string, answer: T, askedTtlMs: number): T {
  if (answer.ttlMs > askedTtlMs) throw invalidAnswer(operation, 200, `ttlMs ${answer.ttlMs} is longer than the ${askedTtlMs} asked`);
  return answer;
}

function invalidAnswer(operation: string, status: number, why: string, cause?: unknown): KeyholderError {
  return new InvalidResponseError(
    `${operation}: HTTP ${status} is not a keyholder answer (${why})`,
    'invalid_response',
    status,
    undefined,
    undefined,
    cause === undefined ? undefined : { cause },
  );
}
