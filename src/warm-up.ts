import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';

/** How much a new instance runs its own request path before it says it is ready (WARM_UP_*). */
export interface WarmUpSettings {
  /** Acquire/renew/release cycles to run at most; 0: no warm-up. */
  readonly cycles: number;
  /** Wall-clock bound (ms): the warm-up stops here whatever is left; 0: no warm-up. */
  readonly maxMs: number;
}

export interface WarmUpResult {
  readonly cycles: number;
  readonly ms: number;
  /** Answers other than the expected ones (a bug in the warm-up or the app; logged, never fatal). */
  readonly unexpected: number;
}

/**
 * 8 callers at once: enough that the app's hooks and the store's paths see overlapping requests (as
 * under load) and the turns stay short; each works on keys of its own, so none waits for another.
 */
const CALLERS = 8;

/** Every 16th cycle also asks for the lock it holds: the 409 lock_held answer (a problem body) is warmed too. */
const CONFLICT_EVERY = 16;

/** 25 ms: how long a batch of cycles may run before the loop is let round (probes, timers, sockets). */
const SLICE_MS = 25;

/** Stays clear of any key a caller would pick, and lives only in the throw-away app's memory store anyway. */
const KEY_PREFIX = 'keyholder-warm-up-';

/**
 * Runs the request path (routing, hooks, validation, the lock service, serialization) a few thousand
 * times through `app` (a throw-away app over an in-process memory store, never the real store), so V8
 * has compiled it before the first caller arrives: cold, each acquire/release pair costs about 1.5 ms of
 * CPU against 0.18 ms once warm, and a new instance sent its full share at once would be slow and shed
 * requests for its first seconds. Bounded by `settings` (cycles and wall time); `stopped` ends it early
 * (shutdown during start).
 */
export async function warmUp(app: FastifyInstance, settings: WarmUpSettings, stopped: () => boolean = () => false): Promise<WarmUpResult> {
  const startedAt = performance.now();
  if (settings.cycles <= 0 || settings.maxMs <= 0) return { cycles: 0, ms: 0, unexpected: 0 };
  const deadline = startedAt + settings.maxMs;
  let cycles = 0;
  let unexpected = 0;
  const expect = (status: number, wanted: number): void => {
    if (status !== wanted) unexpected++;
  };

  const cycle = async (caller: number, n: number): Promise<void> => {
    const url = `/v1/locks/${KEY_PREFIX}${caller}-${n % 4}`;
    const acquired = await app.inject({ method: 'POST', url: `${url}/acquire`, payload: { ttlMs: 10_000, holder: 'warm-up' } });
    expect(acquired.statusCode, 200);
    if (acquired.statusCode !== 200) return;
    const { ownerToken } = acquired.json<{ ownerToken: string }>();
    if (n % CONFLICT_EVERY === 0)
      expect((await app.inject({ method: 'POST', url: `${url}/acquire`, payload: { ttlMs: 10_000 } })).statusCode, 409);
    expect((await app.inject({ method: 'POST', url: `${url}/renew`, payload: { ownerToken, ttlMs: 10_000 } })).statusCode, 200);
    expect((await app.inject({ method: 'POST', url: `${url}/release`, payload: { ownerToken } })).statusCode, 200);
  };

  while (cycles < settings.cycles && !stopped()) {
    const sliceEnd = Math.min(deadline, performance.now() + SLICE_MS);
    while (cycles < settings.cycles && performance.now() < sliceEnd) {
      const batch = Math.min(CALLERS, settings.cycles - cycles);
      await Promise.all(Array.from({ length: batch }, (_, caller) => cycle(caller, cycles)));
      cycles += batch;
    }
    if (performance.now() >= deadline) break;
    // Let the loop come round: /livez and the real app's sockets are answered during the warm-up.
    await nextTurn();
  }
  return { cycles, ms: performance.now() - startedAt, unexpected };
}
