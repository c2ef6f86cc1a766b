import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import type { Redis } from 'ioredis';
import { lockField } from './lock-record.js';

/**
 * A burst of callers on one held lock, spread over several keyholder instances: every caller sends
 * one acquire with waitMs at the same moment. Shared by the burst test (test/load/overload-burst.test.ts, npm run test:overload)
 * and the benchmark (`npm run bench -- --only burst`).
 *
 * Besides the answers, it watches two things from outside the instances:
 *  - who Redis says holds the lock (the lock hash's owner token, read every few ms): every owner it
 *    ever shows must be the first holder or a caller that was answered 200, so no lease went to a
 *    caller that was told it failed;
 *  - /livez of every instance, from a separate process (this one is busy sending the burst, and its
 *    own lateness must not count as the instances').
 * The steady holders renewing beside the burst run in a process of their own too (steady-renewers.mjs).
 */

export interface BurstOptions {
  readonly urls: readonly string[];
  /** A client of the Redis the instances share, to read the lock's owner directly. */
  readonly redis: Redis;
  /** REDIS_KEY_PREFIX of the instances. */
  readonly keyPrefix: string;
  readonly callers: number;
  readonly key: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  /** How often each instance's /livez is asked during the burst. */
  readonly livezIntervalMs?: number;
  /** Holders of other locks that keep renewing through the burst (steady load beside it); default 30. */
  readonly renewers?: number;
}

/** The answers of one kind: how many, and their latency. */
export interface AnswerKind {
  readonly count: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface BurstResult {
  /** By `<status> <code>` (`200`, `409 lock_held`, `503 overloaded`, ...; `error <message>` when no answer). */
  readonly answers: Readonly<Record<string, AnswerKind>>;
  /**
   * The 503 overloaded answers by what refused them (read from their detail): `requests in flight`,
   * `event loop delay`, `open waits`, `connections` (the admission gate, before any store work),
   * `store queue` (the acquire could not be sent to Redis in time), `late grant` (a lease this instance
   * was too late to deliver, given back).
   */
  readonly overloadedBy: Readonly<Record<string, AnswerKind>>;
  /** /livez round trips during the burst, all instances together. */
  readonly livez: AnswerKind & { readonly failed: number };
  /**
   * /livez round trips of the same prober with no burst: for a second before it and a second after it,
   * the steady holders renewing. What the machine's own load (other processes) costs a probe, which the
   * burst's share is measured against (the worse of the two seconds).
   */
  readonly livezIdle: AnswerKind & { readonly failed: number };
  /** Owner tokens Redis showed for the lock that no caller was answered 200 with (and not the first holder's). */
  readonly orphanOwners: number;
  /** Owners Redis showed in all (the first holder included). */
  readonly ownersSeen: number;
  /**
   * 503 overloaded answers to callers whose lease this instance was too late to deliver: a hand-over
   * whose lease ran out before the instance acted on it, or a grant answered so late (the instance held
   * up) that it was given back. Redis showed them as owner for a moment, though nobody was told so.
   */
  readonly handOversLost: number;
  /** The renewals of the steady holders during the burst, by answer (`200`, `503 overloaded`, ...). */
  readonly renewals: Readonly<Record<string, number>>;
  /** The round trips of those renewals (sent to answered, ms). */
  readonly renewalRoundTrips: AnswerKind;
  /**
   * Each renewal answered 409 not_owner (its holder then stops): from the send of its holder's last renewal answered 200 (or of
   * its acquire) to its own answer, and its own round trip (ms). The lease (3 s) ran out in between only
   * if the first is over 3 s: a renewal sent on time (500 ms after the last answer) that took too long
   * to reach Redis.
   */
  readonly lostLeases: ReadonlyArray<{ readonly sinceLastOkSentMs: number; readonly roundTripMs: number }>;
  /** The longest event-loop stall of the processes sending the burst (ms): their own share of the answers' lateness. */
  readonly senderMaxLagMs: number;
  /** The longest event-loop stall of the steady holders' process (ms): its own share of their renewals' lateness. */
  readonly renewersMaxLagMs: number;
  /** Fencing tokens answered with 200 more than once. */
  readonly duplicateTokens: number;
  readonly durationMs: number;
}

const percentile = (sorted: readonly number[], p: number): number =>
  sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number);

export function summarise(latencies: readonly number[]): AnswerKind {
  const sorted = [...latencies].sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    count: sorted.length,
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(sorted.at(-1) ?? 0),
  };
}

/** What refused a 503 overloaded answer, from its detail (see BurstResult.overloadedBy). */
function overloadCause(detail: string): string {
  if (detail.includes('this instance took')) return 'late grant';
  if (detail.includes('acquires in the store')) return 'store queue';
  const budget = /over its (.+?) budget/.exec(detail)?.[1];
  return budget ?? 'other';
}

const PROBER = fileURLToPath(new URL('./livez-prober.mjs', import.meta.url));
const RENEWERS = fileURLToPath(new URL('./steady-renewers.mjs', import.meta.url));
const SENDER = fileURLToPath(new URL('./burst-sender.mjs', import.meta.url));

/**
 * A helper process (the /livez prober, the steady renewers): `ready` once it printed "ready" (rejected
 * if it exits first); `stop()` sends "stop" and returns the JSON line it prints on its way out.
 */
function startHelper<T>(script: string, args: readonly string[]) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (out.includes('ready\n')) {
        child.stdout.off('data', onData);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    void exited.then((code) => reject(new Error(`${script} exited (${code}) before it was ready`)));
  });
  const result = async (): Promise<T> => {
    const code = await exited;
    const line = out.split('\n').find((l) => l.startsWith('{'));
    if (line === undefined) throw new Error(`${script} exited (${code}) without its results`);
    return JSON.parse(line) as T;
  };
  return {
    ready,
    /** Tells it to start (the burst senders: "go"). */
    send: (text: string) => child.stdin.write(text),
    /** What it printed on its way out, once it exited by itself. */
    result,
    async stop(): Promise<T> {
      child.stdin.end('stop\n');
      return result();
    },
  };
}

/** Starts the /livez prober process; `stop()` ends it and returns its round trips (ms) and failures. */
function startLivezProber(urls: readonly string[], intervalMs: number) {
  return startHelper<{ latencies: number[]; failed: number }>(PROBER, [String(intervalMs), ...urls]);
}

/** 1 s: how long /livez is probed with no burst, before it and after it (livezIdle). */
const LIVEZ_IDLE_MS = 1000;

/** /livez probed for `ms` from its own process, as during the burst. */
async function probeLivezFor(urls: readonly string[], intervalMs: number, ms: number): Promise<AnswerKind & { readonly failed: number }> {
  const prober = startLivezProber(urls, intervalMs);
  await prober.ready;
  await new Promise((resolve) => setTimeout(resolve, ms));
  const { latencies, failed } = await prober.stop();
  return { ...summarise(latencies), failed };
}

export async function runBurst(options: BurstOptions): Promise<BurstResult> {
  const { urls, redis, callers, key, ttlMs, waitMs } = options;
  // The first holder's acquire; the burst itself is sent by processes of its own (burst-sender.mjs).
  const agents = urls.map(() => new Agent({ connections: 2, pipelining: 1 }));
  const post = async (instance: number, path: string, body: object) => {
    const res = await request(`${urls[instance] as string}${path}`, {
      method: 'POST',
      dispatcher: agents[instance],
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  };

  // The first holder: nobody renews or releases, so the lock passes to a waiter each time a lease ends.
  let first = await post(0, `/v1/locks/${key}/acquire`, { ttlMs, holder: 'first' });
  for (let attempt = 0; first.status === 503 && first.body.code === 'overloaded' && attempt < 60; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    first = await post(0, `/v1/locks/${key}/acquire`, { ttlMs, holder: 'first' });
  }
  if (first.status !== 200) throw new Error(`the first acquire answered ${first.status}: ${JSON.stringify(first.body)}`);
  const firstOwner = first.body.ownerToken as string;
  let lockHash: string | undefined;
  // A string (this version's record) or a hash (the layout before it: a before/after bench runs an older build).
  for (const candidate of await redis.keys(`${options.keyPrefix}*`)) {
    const type = await redis.type(candidate);
    if ((type === 'string' || type === 'hash') && (await lockField(redis, candidate, 'o').catch(() => null)) === firstOwner)
      lockHash = candidate;
  }
  if (lockHash === undefined) throw new Error('the lock record of the first holder was not found in Redis');

  const owners = new Set<string>([firstOwner]);
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      const owner = await lockField(redis, lockHash, 'o').catch(() => null);
      if (owner) owners.add(owner);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  try {
    return await burstWhileWatching();
  } finally {
    watching = false;
    await watcher;
  }

  async function burstWhileWatching(): Promise<BurstResult> {
    // Steady holders beside the burst, in a process of their own (see steady-renewers.mjs): a renewal refused
    // or answered too late would cost a lease.
    const renewers = startHelper<{
      renewals: Record<string, number>;
      roundTrips: number[];
      lostLeases: Array<{ sinceLastOkSentMs: number; roundTripMs: number }>;
      maxLagMs: number;
    }>(RENEWERS, [JSON.stringify({ urls, key, renewers: options.renewers ?? 30, ttlMs: 3000, everyMs: 500 })]);
    await renewers.ready;

    // The callers, spread over the instances, each instance's share sent by a process of its own
    // (burst-sender.mjs), started (and ready) before
    // the idle probes, all told to go at once.
    type Answer = { kind: string; ms: number; ownerToken?: string; fencingToken?: number; detail?: string };
    const senders = urls.map((url, instance) => {
      const share = Math.floor(callers / urls.length) + (instance < callers % urls.length ? 1 : 0);
      const first = instance * Math.floor(callers / urls.length) + Math.min(instance, callers % urls.length);
      return startHelper<{ answers: Answer[]; maxLagMs: number }>(SENDER, [
        JSON.stringify({ url, path: `/v1/locks/${key}/acquire`, callers: share, first, ttlMs, waitMs }),
      ]);
    });
    await Promise.all(senders.map((s) => s.ready));
    const idleBefore = await probeLivezFor(urls, options.livezIntervalMs ?? 10, LIVEZ_IDLE_MS);
    const prober = startLivezProber(urls, options.livezIntervalMs ?? 10);
    await prober.ready;

    const started = performance.now();
    for (const sender of senders) sender.send('go\n');
    const sent = await Promise.all(senders.map((s) => s.result()));
    const answered = sent.flatMap((s) => s.answers);
    const senderMaxLagMs = Math.max(...sent.map((s) => s.maxLagMs));
    const durationMs = performance.now() - started;
    const livez = await prober.stop();
    const idleAfter = await probeLivezFor(urls, options.livezIntervalMs ?? 10, LIVEZ_IDLE_MS);
    const { renewals, roundTrips, lostLeases, maxLagMs: renewersMaxLagMs } = await renewers.stop();
    // The last grant's owner may still be read; the watcher gets a few more rounds.
    await new Promise((resolve) => setTimeout(resolve, 50));
    watching = false;
    await watcher;
    await Promise.all(agents.map((agent) => agent.close()));

    const byKind = new Map<string, number[]>();
    for (const { kind, ms } of answered) byKind.set(kind, [...(byKind.get(kind) ?? []), ms]);
    const byCause = new Map<string, number[]>();
    for (const { kind, ms, detail } of answered) {
      if (kind !== '503 overloaded') continue;
      const cause = overloadCause(detail ?? '');
      byCause.set(cause, [...(byCause.get(cause) ?? []), ms]);
    }
    const granted = answered.filter((a) => a.kind === '200');
    const grantedOwners = new Set(granted.map((a) => a.ownerToken));
    const tokens = granted.map((a) => a.fencingToken);
    return {
      answers: Object.fromEntries([...byKind].sort(([a], [b]) => a.localeCompare(b)).map(([kind, ms]) => [kind, summarise(ms)])),
      overloadedBy: Object.fromEntries([...byCause].sort(([a], [b]) => a.localeCompare(b)).map(([cause, ms]) => [cause, summarise(ms)])),
      livez: { ...summarise(livez.latencies), failed: livez.failed },
      livezIdle: [idleBefore, idleAfter].reduce((worse, idle) => (idle.p99Ms > worse.p99Ms ? idle : worse)),
      orphanOwners: [...owners].filter((o) => o !== firstOwner && !grantedOwners.has(o)).length,
      ownersSeen: owners.size,
      // A hand-over that ran out before delivery, or a grant this instance was too late to deliver (given back).
      handOversLost: answered.filter((a) => a.kind === '503 overloaded' && a.detail?.includes('this instance took')).length,
      renewals: Object.fromEntries(Object.entries(renewals).sort(([a], [b]) => a.localeCompare(b))),
      renewalRoundTrips: summarise(roundTrips),
      lostLeases,
      senderMaxLagMs,
      renewersMaxLagMs,
      duplicateTokens: tokens.length - new Set(tokens).size,
      durationMs: Math.round(durationMs),
    };
  }
}

/** The result as Markdown table rows: kind, count, p50, p99, max. */
export function renderBurst(result: BurstResult): string {
  const rows = Object.entries(result.answers).map(([kind, a]) => `| ${kind} | ${a.count} | ${a.p50Ms} | ${a.p99Ms} | ${a.maxMs} |`);
  const { livez } = result;
  return [
    '| answer | count | p50 ms | p99 ms | max ms |',
    '|---|---:|---:|---:|---:|',
    ...rows,
    ...Object.entries(result.overloadedBy).map(
      ([cause, a]) => `| 503 overloaded: ${cause} | ${a.count} | ${a.p50Ms} | ${a.p99Ms} | ${a.maxMs} |`,
    ),
    `| /livez during the burst | ${livez.count} (${livez.failed} failed) | ${livez.p50Ms} | ${livez.p99Ms} | ${livez.maxMs} |`,
    `| /livez without a burst (the worse second, before or after) | ${result.livezIdle.count} (${result.livezIdle.failed} failed) | ${result.livezIdle.p50Ms} | ${result.livezIdle.p99Ms} | ${result.livezIdle.maxMs} |`,
    '',
    `Renewals of ${Object.values(result.renewals).reduce((n, c) => n + c, 0)} by steady holders during the burst: ${JSON.stringify(result.renewals)}; ` +
      `round trip p50 ${result.renewalRoundTrips.p50Ms} ms, p99 ${result.renewalRoundTrips.p99Ms} ms, max ${result.renewalRoundTrips.maxMs} ms` +
      (result.lostLeases.length > 0
        ? `; leases lost (ms since the last renewal answered 200 was sent / own round trip): ${result.lostLeases.map((l) => `${l.sinceLastOkSentMs}/${l.roundTripMs}`).join(', ')}`
        : '') +
      `. Longest stall of the burst's senders: ${result.senderMaxLagMs} ms; of the steady holders' process: ${result.renewersMaxLagMs} ms.`,
    '',
    `Owners Redis showed: ${result.ownersSeen} (not answered 200: ${result.orphanOwners}; leases too late to deliver, given back or run out: ${result.handOversLost}); duplicate fencing tokens: ${result.duplicateTokens}; burst took ${result.durationMs} ms.`,
  ].join('\n');
}
