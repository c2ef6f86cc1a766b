import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
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
 * Runs the request path (HTTP parsing, routing, hooks, validation, the lock service, serialization) a few
 * thousand times through `app` (a throw-away app over an in-process memory store, never the real store), so V8
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

  // Over a loopback socket, not app.inject: Node's HTTP server (parsing, the response's writes, the
  // socket) is code the real server shares and inject never runs. Only this host reaches it
  // (127.0.0.1, a port the kernel picks), only for the warm-up's time, and only the memory store behind it.
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const agent = new Agent({ keepAlive: true, maxSockets: CALLERS });
  const post = (path: string, body: unknown): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });

  const cycle = async (caller: number, n: number): Promise<void> => {
    const url = `/v1/locks/${KEY_PREFIX}${caller}-${n % 4}`;
    const acquired = await post(`${url}/acquire`, { ttlMs: 10_000, holder: 'warm-up' });
    expect(acquired.status, 200);
    if (acquired.status !== 200) return;
    const { ownerToken } = JSON.parse(acquired.body) as { ownerToken: string };
    if (n % CONFLICT_EVERY === 0) expect((await post(`${url}/acquire`, { ttlMs: 10_000 })).status, 409);
    expect((await post(`${url}/renew`, { ownerToken, ttlMs: 10_000 })).status, 200);
    expect((await post(`${url}/release`, { ownerToken })).status, 200);
  };

  try {
    while (cycles < settings.cycles && !stopped()) {
      const sliceEnd = Math.min(deadline, performance.now() + SLICE_MS);
      while (cycles < settings.cycles && performance.now() < sliceEnd) {
        const batch = Math.min(CALLERS, settings.cycles - cycles);
        await Promise.all(Array.from({ length: batch }, (_, caller) => cycle(caller, cycles + caller)));
        cycles += batch;
      }
      if (performance.now() >= deadline) break;
      // Let the loop come round: /livez and the real app's sockets are answered during the warm-up.
      await nextTurn();
    }
  } finally {
    agent.destroy();
  }
  return { cycles, ms: performance.now() - startedAt, unexpected };
}
