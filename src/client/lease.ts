import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidResponseError, KeyholderError, LeaseLostError, NotOwnerError } from './errors.js';
import type { components } from './openapi-types.js';
import { type BackoffOptions, monotonicNow, retryDelayMs } from './retry.js';

type LockGrant = components['schemas']['LockGrant'];
type LockRenewal = components['schemas']['LockRenewal'];
type ReleaseRequested = components['schemas']['ReleaseRequested'];

export interface LeaseOptions {
  /** Renew automatically (default true). Without it the lease still aborts its signal at the safe deadline. */
  readonly autoRenew?: boolean;
  /**
   * Taken off the safe deadline to cover a client clock that runs slow against the store's and a timer that
   * fires late on a busy event loop. Default: 50 ms + 2% of the TTL.
   */
  readonly driftMarginMs?: number;
}

/** What a lease needs from the client. */
export interface LeaseTransport {
  readonly backoff: BackoffOptions;
  /** One renew attempt, no retries: the lease decides when to try again. */
  renewOnce(key: string, ownerToken: string, ttlMs: number, signal: AbortSignal, timeoutMs: number): Promise<LockRenewal>;
  /** Release with retries until `deadlineAt` (monotonic ms); resolves if the token no longer holds the lock. */
  release(key: string, ownerToken: string, deadlineAt: number): Promise<void>;
}

/** Renew at about a third of the TTL: two more tries fit before the lease would end. */
const RENEW_FRACTION = 1 / 3;
/** ±10% so that many leases taken at once do not renew in lockstep. */
const RENEW_JITTER = 0.1;

/**
 * A held lock. It renews itself in the background and aborts `signal` the moment the lease can no longer
 * be trusted: a renewal refused (not_owner, e.g. force-released) or answered with another fencing token
 * than the lease's (an answer about another lease), or the safe deadline reached without a
 * confirmed renewal. The safe deadline is measured on this process's monotonic clock from when the last
 * confirmed acquire or renewal was *sent*: the server started the lease no earlier than that, so it cannot
 * end before send time + TTL; the drift margin covers clock-rate differences and late timers.
 */
export class Lease {
  readonly key: string;
  readonly ownerToken: string;
  /** Pass it to the protected resource; it must reject writes with a lower token than it has seen. */
  readonly fencingToken: number;
  readonly holder: string | null;
  /** Aborts (reason: LeaseLostError) when the lease is lost. Pass it to the work the lock protects. */
  readonly signal: AbortSignal;

  private ttlMsValue: number;
  private expiresAtValue: string;
  private safeDeadlineAt: number;
  private readonly driftMarginMs: number;
  private readonly lostController = new AbortController();
  /** Stops the renew loop for good (on release, keep or loss). */
  private readonly stopController = new AbortController();
  private deadlineTimer: NodeJS.Timeout | undefined;
  /**
   * Releases under way: the lease is neither renewed nor watched meanwhile (work done before the release is
   * not made a loss by a slow answer). One that fails puts the watch back.
   */
  private releasing = 0;
  /** A release gave the lease back or found nothing to give (or keep was called): nothing left to send. */
  private releaseSettled = false;
  private releaseRequestedValue: ReleaseRequested | null = null;
  private readonly releaseListeners = new Set<(request: ReleaseRequested) => void>();

  constructor(
    private readonly transport: LeaseTransport,
    grant: LockGrant,
    sentAt: number,
    private readonly options: LeaseOptions = {},
  ) {
    this.key = grant.key;
    this.ownerToken = grant.ownerToken;
    this.fencingToken = grant.fencingToken;
    this.holder = grant.holder;
    this.signal = this.lostController.signal;
    this.ttlMsValue = grant.ttlMs;
    this.expiresAtValue = grant.expiresAt;
    this.driftMarginMs = options.driftMarginMs ?? 50 + Math.ceil(grant.ttlMs * 0.02);
    this.safeDeadlineAt = sentAt + grant.ttlMs - this.driftMarginMs;
    // Armed by start: until then the caller has not got the lease (see renewBeforeHandingOut).
  }

  /** The lease's TTL as last granted or renewed. */
  get ttlMs(): number {
    return this.ttlMsValue;
  }

  /** When the server says the lease ends (store clock), as of the last confirmed grant or renewal. */
  get expiresAt(): string {
    return this.expiresAtValue;
  }

  /** Milliseconds left before the safe deadline (0 once passed). */
  get remainingMs(): number {
    return Math.max(0, this.safeDeadlineAt - monotonicNow());
  }

  /**
   * Someone asked this lease's holder to let go (an operator's release request), as the last renewal said;
   * null while nobody has. Not a loss: the lease stays this caller's until it releases it or stops renewing.
   */
  get releaseRequested(): ReleaseRequested | null {
    return this.releaseRequestedValue;
  }

  /**
   * Calls `listener` once when a renewal first carries a release request (at once if one already did), and
   * again if the request is made anew (another time, asker or reason). Returns a function that removes it.
   * A listener that throws is not retried; the lease goes on renewing.
   */
  onReleaseRequested(listener: (request: ReleaseRequested) => void): () => void {
    this.releaseListeners.add(listener);
    if (this.releaseRequestedValue !== null) this.tell(listener, this.releaseRequestedValue);
    return () => this.releaseListeners.delete(listener);
  }

  /**
   * True once the lease was lost (the signal aborted). A safe deadline already passed counts at once, even
   * before its timer has run: a process frozen or starved past it (SIGSTOP, a long GC) may see other events
   * first when it wakes (a child's exit, say), and must not report that work as done under the lock.
   */
  get lost(): boolean {
    if (!this.done && monotonicNow() >= this.safeDeadlineAt) this.lose('deadline');
    return this.signal.aborted;
  }

  /**
   * Called once by the client after acquire. A grant that took longer than a renewal period to arrive (a
   * long wait in the queue, retries) is renewed at once, so the caller starts with a full safe window; so
   * is one that may be older than the call that got it (`grantMayBeOlder`: a replay, for the caller's own
   * Idempotency-Key, of a lease an earlier call was granted, whose end the safe deadline of this call
   * would overstate by up to a whole TTL).
   */
  async start(grantMayBeOlder = false): Promise<void> {
    if (grantMayBeOlder || this.remainingMs < this.ttlMsValue * (1 - RENEW_FRACTION)) await this.renewBeforeHandingOut();
    else this.armDeadline();
    if (this.signal.aborted) throw this.signal.reason;
    if (this.options.autoRenew ?? true) void this.renewLoop();
  }

  /**
   * Gives the lock back and stops renewing. Resolves once released, or when there is nothing to give back
   * (the lease was lost or expired). Retries an unreachable server until the lease would have ended anyway.
   * A release that threw gave nothing back for sure: calling it again tries again, and keep() keeps the
   * lease instead. Until then the lease is not renewed (it was let go of) but is still watched: it is lost
   * (signal, lost) at its safe deadline.
   */
  async release(): Promise<void> {
    if (this.releaseSettled) return;
    // Nothing to give back once lost. Asked first: a deadline passed while its timer has not run is a
    // loss too (see lost).
    if (this.lost) return this.settle();
    this.releasing += 1;
    this.stop();
    let settled = false;
    try {
      await this.transport.release(this.key, this.ownerToken, this.safeDeadlineAt + this.driftMarginMs);
      settled = true;
    } catch (err) {
      // Unreachable until the lease's own end: the store frees it by TTL, so there is nothing left to do.
      if (!(err instanceof KeyholderError && err.retryable && monotonicNow() >= this.safeDeadlineAt)) throw err;
      settled = true;
    } finally {
      this.releasing -= 1;
      if (settled) this.settle();
      // Nothing given back for sure: the lease may still be held, so its safe deadline is watched again (a
      // loss aborts the signal), though it is no longer renewed.
      else this.armDeadline();
    }
  }

  /**
   * Stops renewing and leaves the lock held until its lease runs out, without releasing it. For work that
   * must happen once per period (a cron tick named in the key): kept, the key cannot be taken again by
   * a caller that asks late, after the work is done. After a release that threw too: a later release()
   * (withLock's own included) then sends nothing.
   */
  keep(): void {
    this.settle();
  }

  /** Nothing is to be renewed or watched any more for now: released, being released, kept or lost. */
  private get done(): boolean {
    return this.releaseSettled || this.releasing > 0 || this.signal.aborted;
  }

  /** The release is done (or keep was called): a later release has nothing left to send, nothing is watched. */
  private settle(): void {
    this.releaseSettled = true;
    this.stop();
  }

  /** One renewal request, given up on at the safe deadline (nothing it could confirm is of use after it). */
  private renewOnce(sentAt: number) {
    return this.transport.renewOnce(
      this.key,
      this.ownerToken,
      this.ttlMsValue,
      this.stopController.signal,
      Math.max(1, this.safeDeadlineAt - sentAt),
    );
  }

  /**
   * The renewal of a grant before the caller has it. Nothing has run under the lease yet, so a confirmed
   * renewal starts its safe window afresh from its own send, even when the grant's window has passed
   * already (a wait in the queue longer than the TTL: that grant was lost at once, and the lock left held
   * by nobody until its TTL). Its wait is the request timeout's, not what is left of that window. A
   * renewal that fails loses the lease, and the grant is given back (best effort) rather than left held.
   */
  private async renewBeforeHandingOut(): Promise<void> {
    const sentAt = monotonicNow();
    try {
      const renewal = this.ofThisLease(
        await this.transport.renewOnce(this.key, this.ownerToken, this.ttlMsValue, this.stopController.signal, Infinity),
      );
      this.safeDeadlineAt = Infinity;
      this.confirm(sentAt, renewal);
    } catch (err) {
      this.lose(err instanceof NotOwnerError ? 'not_owner' : 'renew_failed', err);
      if (!(err instanceof NotOwnerError)) {
        this.transport.release(this.key, this.ownerToken, monotonicNow() + this.ttlMsValue).catch(() => undefined);
      }
    }
  }

  private async renewLoop(): Promise<void> {
    let failures = 0;
    let delayMs = this.renewDelayMs();
    while (!this.stopped) {
      try {
        // ref: false, so a lease alone never keeps the process alive (a forgotten lease just expires).
        await sleep(delayMs, undefined, { signal: this.stopController.signal, ref: false });
      } catch {
        return;
      }
      const sentAt = monotonicNow();
      try {
        const renewal = this.ofThisLease(await this.renewOnce(sentAt));
        if (this.stopped) return;
        this.confirm(sentAt, renewal);
        failures = 0;
        delayMs = this.renewDelayMs();
      } catch (err) {
        // Stopped (released, kept or lost) meanwhile: a renewal cut short by it is no failure of the lease's,
        // even once a release that failed has put the watch back.
        if (this.stopped) return;
        if (err instanceof NotOwnerError) return this.lose('not_owner', err);
        if (!(err instanceof KeyholderError) || !err.retryable) return this.lose('renew_failed', err);
        failures += 1;
        // Retry-After is honoured, but never past half of what is left before the safe deadline: a renewal
        // is the one call whose delay costs the lease, so one more attempt must still fit.
        // (At least 10 ms, so that a server refusing at once near the deadline is not called in a tight loop.)
        delayMs = Math.max(10, Math.min(retryDelayMs(err.retryAfterMs, failures, this.transport.backoff), this.remainingMs / 2));
      }
    }
  }

  /**
   * A renewal never changes the fencing token: one that carries another is an answer about another lease
   * (a server or proxy that mixed leases up, or this one replaced), so this lease can no longer be trusted.
   * Refused as no keyholder answer, which is not retried: the lease is lost (renew_failed).
   */
  private ofThisLease(renewal: LockRenewal): LockRenewal {
    if (renewal.fencingToken === this.fencingToken) return renewal;
    throw new InvalidResponseError(
      `renew: HTTP 200 is not a keyholder answer (fencingToken ${renewal.fencingToken}, the lease's is ${this.fencingToken})`,
      'invalid_response',
      200,
      undefined,
      undefined,
    );
  }

  private renewDelayMs(): number {
    const period = this.ttlMsValue * RENEW_FRACTION * (1 - RENEW_JITTER + Math.random() * 2 * RENEW_JITTER);
    // Counted from the last confirmed send, not from now: a slow answer must not push the next renewal late.
    return Math.max(0, period - (this.ttlMsValue - this.driftMarginMs - this.remainingMs));
  }

  private confirm(sentAt: number, renewal: LockRenewal): void {
    // A confirmation that arrives after the deadline does not un-lose the lease: the signal may already
    // have told the caller to stop (or its timer is about to).
    if (monotonicNow() >= this.safeDeadlineAt) return this.lose('deadline');
    this.ttlMsValue = renewal.ttlMs;
    this.expiresAtValue = renewal.expiresAt;
    this.safeDeadlineAt = sentAt + renewal.ttlMs - this.driftMarginMs;
    this.armDeadline();
    const asked = renewal.releaseRequested;
    const known = this.releaseRequestedValue;
    if (asked !== undefined && (known === null || known.at !== asked.at || known.by !== asked.by || known.reason !== asked.reason)) {
      this.releaseRequestedValue = asked;
      for (const listener of this.releaseListeners) this.tell(listener, asked);
    }
  }

  /** A listener's failure is its own: it must not stop the renewals that keep the lease. */
  private tell(listener: (request: ReleaseRequested) => void, request: ReleaseRequested): void {
    try {
      listener(request);
    } catch {
      // (Deliberately ignored: see onReleaseRequested.)
    }
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    if (this.done) return;
    const left = this.safeDeadlineAt - monotonicNow();
    if (left <= 0) return this.lose('deadline');
    this.deadlineTimer = setTimeout(() => this.armDeadline(), Math.ceil(left));
    this.deadlineTimer.unref();
  }

  private lose(reason: LeaseLostError['reason'], cause?: unknown): void {
    if (this.done) return;
    this.stop();
    this.lostController.abort(new LeaseLostError(this.key, reason, cause === undefined ? undefined : { cause }));
  }

  /** Renewals are over for good: released (or being released, even if that fails), kept or lost. */
  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  private stop(): void {
    clearTimeout(this.deadlineTimer);
    this.stopController.abort();
  }
}
