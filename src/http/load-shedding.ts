import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import underPressure from '@fastify/under-pressure';
import { OverloadedError } from '../domain/errors.js';
import { matchedRoute } from './matched-route.js';

/**
 * What one instance takes on before it refuses new work with 503 `overloaded` (0 turns a budget off).
 * Past a budget the process answers late and its own lateness would read as the store's (timeouts);
 * refusing at once, before any store work, tells the caller the truth and keeps the instance quick.
 */
export interface LoadBudget {
  /**
   * Event-loop delay (ms) above which new work is refused: the mean over the last sample, or how long
   * the turn being run has kept the loop from coming round, whichever is larger.
   */
  readonly maxEventLoopDelayMs: number;
  /** Requests being worked on (received, not yet answered, not waiting in a queue) at once. */
  readonly maxRequestsInFlight: number;
  /** Callers of this instance waiting in a queue at once, above which new work is refused. */
  readonly maxOpenWaits: number;
}

export type ShedBudget = OverloadedError['budget'];
/** `last`: renewals and releases, refused only far past the requests-in-flight budget (a renewal refused costs a lease). */
export type ShedPriority = 'normal' | 'last';

export interface LoadSheddingOptions {
  readonly budget: LoadBudget;
  /** Callers of this instance waiting right now (LockService.waitingCallers: every primitive's queues). */
  readonly openWaits: () => number;
  /** Told of every refusal (the keyholder_requests_shed_total counter). */
  readonly onShed?: (budget: ShedBudget, priority: ShedPriority) => void;
}

/**
 * 100 ms: how often the event-loop delay is sampled (by @fastify/under-pressure): a burst is seen
 * within a tenth of a second, and a sample is the mean of ten 10 ms probes, so one slow tick does not
 * trip it.
 */
const SAMPLE_INTERVAL_MS = 100;

/**
 * 4: renewals and releases are refused only at four times the requests-in-flight budget: a flood of
 * them and nothing else. Never for event-loop delay, and never for open waits (they add to neither):
 * both are cheap, a release frees what the others wait for, and a renewal refused costs its caller the
 * lease. A process starved of CPU (a busy host) shows the same delay as an overloaded one, and a
 * renewal answered late still keeps its lease, where one refused never does.
 */
const LAST_PRIORITY_HEADROOM = 4;

/**
 * 10 ms: the tick of the turn clock. A burst is read in one long turn of the event loop: every socket
 * that became readable is parsed and run through the hooks before any timer fires, so the sampled
 * mean above still shows the last quiet 100 ms while the turn takes hundreds. The tick cannot fire
 * during such a turn: a request read when the tick is over the budget late is refused then, in the
 * turn that would otherwise take on the whole burst, and the probes read in the next turn are not kept
 * waiting behind its work.
 */
const TURN_TICK_MS = 10;

/** 1 s: about ten delay samples; by then the burst that tripped a budget has been answered or refused. */
const RETRY_AFTER_MS = 1000;

/** Probes and the metrics scrape are never refused: an overloaded instance must still be seen as alive and be measured. */
const NEVER_SHED = new Set(['/livez', '/readyz', '/metrics']);

/** The routes that keep a held lease alive or give it back (locks, lock sets, semaphores, read/write locks). */
const isRenewalOrRelease = (url: string): boolean => url.endsWith('/renew') || url.endsWith('/release');

/**
 * Load shedding, in an onRequest hook (before the body is read and before any store call). Event-loop
 * delay comes from @fastify/under-pressure's sampler (its own refusal is not used: it knows neither
 * keyholder's problem answers nor which requests must pass); requests in flight and open waits are
 * counted here.
 */
export async function registerLoadShedding(app: FastifyInstance, options: LoadSheddingOptions): Promise<void> {
  const { budget, openWaits, onShed } = options;
  // No thresholds given: under-pressure only samples, and app.memoryUsage() reads the last sample.
  await app.register(underPressure, { sampleInterval: SAMPLE_INTERVAL_MS });
  let inFlight = 0;
  // When the turn clock last ticked; how late it is now is how long the loop has not come round.
  let tickedAt = performance.now();
  // The longest the loop kept the turn clock waiting, in this window of SAMPLE_INTERVAL_MS and the last.
  let windowStartedAt = tickedAt;
  let longestGapMs = 0;
  let lastWindowLongestGapMs = 0;
  const turnClock = setInterval(() => {
    const now = performance.now();
    if (now - windowStartedAt >= SAMPLE_INTERVAL_MS) {
      lastWindowLongestGapMs = longestGapMs;
      longestGapMs = 0;
      windowStartedAt = now;
    }
    longestGapMs = Math.max(longestGapMs, now - tickedAt);
    tickedAt = now;
  }, TURN_TICK_MS).unref();
  app.addHook('onClose', (_instance, done) => {
    clearInterval(turnClock);
    done();
  });
  /**
   * The sampler's mean, or (its window empty) the longest wait of the turn clock. A window in which
   * none of its probes ran reads as Infinity in under-pressure, and stays so while every sample is
   * taken before the next probe: measured on a cold instance at load 10-12 on two cores, for up to
   * a second at a time while the turn clock came round every 20-270 ms, refusing every new request.
   */
  const sampledDelayMs = (): number => {
    const sampled = app.memoryUsage().eventLoopDelay;
    return Number.isFinite(sampled) ? sampled : Math.max(0, Math.max(longestGapMs, lastWindowLongestGapMs) - TURN_TICK_MS);
  };
  const eventLoopDelayMs = (): number => Math.max(sampledDelayMs(), performance.now() - tickedAt - TURN_TICK_MS);

  const overBudget = (priority: ShedPriority): ShedBudget | null => {
    const headroom = priority === 'last' ? LAST_PRIORITY_HEADROOM : 1;
    const waiting = openWaits();
    if (budget.maxRequestsInFlight > 0 && inFlight - waiting >= budget.maxRequestsInFlight * headroom) return 'requests_in_flight';
    if (priority === 'normal' && budget.maxEventLoopDelayMs > 0 && eventLoopDelayMs() > budget.maxEventLoopDelayMs)
      return 'event_loop_delay';
    if (priority === 'normal' && budget.maxOpenWaits > 0 && waiting >= budget.maxOpenWaits) return 'open_waits';
    return null;
  };

  const leave = (): void => {
    inFlight--;
  };
  // Callback style: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request: FastifyRequest, reply, done) => {
    const url = matchedRoute(request).url ?? '';
    if (NEVER_SHED.has(url)) {
      done();
      return;
    }
    const priority: ShedPriority = isRenewalOrRelease(url) ? 'last' : 'normal';
    const over = overBudget(priority);
    if (over !== null) {
      onShed?.(over, priority);
      done(new OverloadedError(over, RETRY_AFTER_MS));
      return;
    }
    inFlight++;
    // 'close' comes exactly once per response, whether it was sent, failed or the caller went away:
    // one listener function for all of them, and no once-wrapper made per request.
    reply.raw.on('close', leave);
    done();
  });
}
