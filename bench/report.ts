import type { ChainResult, ExpiryResult, LoopResult, LoopScenario, MemoryResult, WatchResult } from './protocol.js';

/** Turns the measurements of every round into the Markdown report. Numbers only; no judgement here but the targets. */

export interface Machine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly node: string;
  readonly redis: string;
  readonly etcd: string | null;
  readonly loadBefore: string;
  readonly loadAfter: string;
  readonly date: string;
  /** The command line that produced the report. */
  readonly command: string;
}

export interface Settings {
  readonly rounds: number;
  readonly warmMs: number;
  readonly durationMs: number;
  readonly concurrencies: readonly number[];
}

export type Results = Map<LoopScenario, Map<number, LoopResult[]>>;

export interface Report {
  readonly machine: Machine;
  readonly settings: Settings;
  readonly results: Results;
  readonly memory?: MemoryResult;
  readonly chains: readonly ChainResult[];
  readonly watches?: readonly WatchResult[];
  readonly expiry?: ExpiryResult;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function num(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** "median (min-max)" over rounds; just the value when there is one round. */
function spread(values: readonly (number | undefined)[], digits: number): string {
  const known = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  if (known.length === 0) return 'n/a';
  const m = num(median(known), digits);
  if (known.length === 1) return m;
  return `${m} (${num(Math.min(...known), digits)}–${num(Math.max(...known), digits)})`;
}

/**
 * Every loop scenario, with what one unit of its throughput is made of. `callsPerUnit` is how many
 * requests (or store calls) a unit takes, so each baseline can be compared per request as well as per
 * pair. A new scenario (a floor lock, say) is one more entry here and one more case in load-worker.ts.
 */
export const SCENARIOS: ReadonlyArray<{ id: LoopScenario; name: string; unit: string; op: string; callsPerUnit: number; calls: string }> = [
  {
    id: 'pairs',
    name: 'keyholder pairs (10,000 keys)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire + release (2 HTTP requests)',
  },
  {
    id: 'semaphore',
    name: 'keyholder semaphore permits (100 x limit 5, waitMs)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire + release of one permit (2 HTTP requests)',
  },
  {
    id: 'hot',
    name: 'keyholder hot key, waitMs',
    unit: 'hand-offs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire with waitMs + release (2 HTTP requests)',
  },
  { id: 'renew', name: 'keyholder renew', unit: 'renews/s', op: 'renew', callsPerUnit: 1, calls: 'renew (1 HTTP request)' },
  {
    id: 'floor-http',
    name: 'floor-http (bare Fastify)',
    unit: 'req/s',
    op: 'request',
    callsPerUnit: 1,
    calls: 'one JSON echo (1 HTTP request)',
  },
  {
    id: 'floor-lock',
    name: 'floor-lock (naive lock service)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire + release (2 HTTP requests, 1 script each)',
  },
  {
    id: 'floor-redis',
    name: 'floor-redis (Lua via ioredis)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire + release scripts (2 Redis calls)',
  },
  {
    id: 'peer-etcd',
    name: 'peer-etcd (lease+lock+unlock)',
    unit: 'pairs/s',
    op: 'lock',
    callsPerUnit: 3,
    calls: 'lease grant + lock + unlock (3 HTTP calls)',
  },
  {
    id: 'peer-live-mutex',
    name: 'peer-live-mutex (TCP broker)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'lock + unlock (2 broker messages over TCP)',
  },
  {
    id: 'peer-redis-semaphore',
    name: 'peer-redis-semaphore (in-process Mutex)',
    unit: 'pairs/s',
    op: 'acquire',
    callsPerUnit: 2,
    calls: 'acquire + release (2 Redis calls from the load process)',
  },
];

/**
 * The lock services side by side, with what each gives: the figures are only comparable next to it.
 * keyholder's row is its production settings (API keys, rate limiter, quota, logs, metrics).
 */
const PEERS: ReadonlyArray<{ id: LoopScenario; runs: string; fencing: string; auth: string; waiting: string; persistence: string }> = [
  {
    id: 'pairs',
    runs: 'HTTP service (Fastify) over Redis, one Lua script per call',
    fencing: 'yes: per-key token, never goes back',
    auth: 'API keys with scopes, per-namespace quota, rate limit',
    waiting: 'FIFO queue (waitMs), woken by the release',
    persistence: 'Redis (AOF, replicas, Sentinel, Cluster) or etcd',
  },
  {
    id: 'floor-lock',
    runs: 'naive HTTP service (Fastify) over Redis, one Lua script per call',
    fencing: 'yes: INCR counter',
    auth: 'none',
    waiting: 'none (409)',
    persistence: 'Redis',
  },
  {
    id: 'peer-etcd',
    runs: 'etcd v3 JSON gateway: lease grant + lock + unlock',
    fencing: "the lock key's revision can serve",
    auth: 'etcd users and roles (off here)',
    waiting: 'yes, in revision order',
    persistence: 'raft log, fsync per write',
  },
  {
    id: 'peer-live-mutex',
    runs: 'Node TCP broker (live-mutex), locks in its memory',
    fencing: 'none',
    auth: 'none',
    waiting: 'queue in the broker',
    persistence: 'none: a broker restart forgets every lock',
  },
  {
    id: 'peer-redis-semaphore',
    runs: "library in the caller's process (redis-semaphore Mutex), no service",
    fencing: 'none',
    auth: "the Redis connection's own",
    waiting: 'polling (every 10 ms)',
    persistence: 'Redis',
  },
];

/** The peers table: each lock service's pairs/s, CPU per pair, acquire latency tail, and what it gives. */
export function peersTable(report: Report, c = 50): string {
  const keyholder = rounds(report.results, 'pairs', c);
  const lines = [
    `Concurrency ${c}, acquire + release pairs on distinct keys; median over rounds (min–max). Server CPU: the serving process ` +
      '(for redis-semaphore, the load process, where the library runs). The acquire column is the call that takes the lock ' +
      '(etcd: lock, after its lease grant). Ratios are to keyholder within each round.',
    '',
    '| lock service | how it runs | pairs/s | ÷ keyholder | server CPU µs per pair | Redis CPU µs per pair | acquire p99 ms | acquire p99.9 ms | fencing | auth | waiting | persistence |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |',
  ];
  for (const peer of PEERS) {
    const rs = rounds(report.results, peer.id, c);
    if (rs.length === 0) continue;
    const op = scenarioOf(peer.id).op;
    const lat = rs.map((r) => r.latency[op]);
    const perPair = (cpu: (r: LoopResult) => number | undefined) =>
      spread(
        rs.map((r) => {
          const v = cpu(r);
          return v === undefined || r.units === 0 ? undefined : (v / r.units) * 1e6;
        }),
        0,
      );
    lines.push(
      `| ${scenarioOf(peer.id).name} | ${peer.runs} | ${spread(
        rs.map((r) => r.unitsPerSecond),
        0,
      )} | ` +
        `${
          peer.id === 'pairs'
            ? '1'
            : spread(
                perRound(rs, keyholder, (x, y) => x.unitsPerSecond / y.unitsPerSecond),
                2,
              )
        } | ` +
        `${perPair((r) => r.serverCpuSeconds)} | ${perPair((r) => r.redisCpuSeconds)} | ` +
        `${spread(
          lat.map((l) => l?.p99),
          2,
        )} | ${spread(
          lat.map((l) => l?.p999),
          2,
        )} | ` +
        `${peer.fencing} | ${peer.auth} | ${peer.waiting} | ${peer.persistence} |`,
    );
  }
  return lines.join('\n');
}

function scenarioOf(id: LoopScenario) {
  return SCENARIOS.find((s) => s.id === id) as (typeof SCENARIOS)[number];
}

const perThousand = (cpu: number | undefined, units: number) => (cpu === undefined || units === 0 ? undefined : (cpu / units) * 1000);

function rounds(results: Results, id: LoopScenario, c: number): LoopResult[] {
  return results.get(id)?.get(c) ?? [];
}

export function resultsTable(report: Report): string {
  const lines = [
    '| scenario | c | throughput | calls per unit | calls/s | latency of | p50 ms | p99 ms | p99.9 ms | server CPU s / 1k | Redis CPU s / 1k | errors |',
    '| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const c of report.settings.concurrencies) {
    for (const s of SCENARIOS) {
      const rs = rounds(report.results, s.id, c);
      if (rs.length === 0) continue;
      const lat = rs.map((r) => r.latency[s.op]);
      const errors = rs.reduce((n, r) => n + Object.values(r.errors).reduce((a, b) => a + b, 0), 0);
      lines.push(
        `| ${s.name} | ${c} | ${spread(
          rs.map((r) => r.unitsPerSecond),
          0,
        )} ${s.unit} | ${s.callsPerUnit} | ` +
          `${spread(
            rs.map((r) => r.unitsPerSecond * s.callsPerUnit),
            0,
          )} | ${s.op} | ` +
          `${spread(
            lat.map((l) => l?.p50),
            2,
          )} | ${spread(
            lat.map((l) => l?.p99),
            2,
          )} | ${spread(
            lat.map((l) => l?.p999),
            2,
          )} | ` +
          `${spread(
            rs.map((r) => perThousand(r.serverCpuSeconds, r.units)),
            3,
          )} | ` +
          `${
            s.id === 'peer-etcd' || s.id === 'floor-http' || s.id === 'peer-live-mutex'
              ? '–'
              : spread(
                  rs.map((r) => perThousand(r.redisCpuSeconds, r.units)),
                  3,
                )
          } | ${errors} |`,
      );
    }
  }
  return lines.join('\n');
}

/**
 * A target: a ratio against a baseline, measured per request (or store call) and per pair, with the
 * goal applying to one of them (`on`). Both are printed so that no comparison mixes units silently.
 */
interface Target {
  readonly name: string;
  /** What one unit is on each side. */
  readonly units: string;
  readonly goal: string;
  readonly on: 'per request' | 'per pair';
  readonly perRequest: number[];
  readonly perPair: number[];
  readonly digits: number;
  readonly met: (v: number) => boolean;
}

/** Ratios are computed within each round (same load on the machine), then summarised over rounds. */
function perRound(a: LoopResult[], b: LoopResult[], f: (x: LoopResult, y: LoopResult) => number | undefined): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const v = f(a[i] as LoopResult, b[i] as LoopResult);
    if (v !== undefined && Number.isFinite(v)) out.push(v);
  }
  return out;
}

/** keyholder pairs against a baseline scenario, per pair and per request (units x calls per unit). */
function throughputRatios(r: Results, c: number, baseline: LoopScenario): { perPair: number[]; perRequest: number[] } {
  const [a, b] = [rounds(r, 'pairs', c), rounds(r, baseline, c)];
  const callsA = scenarioOf('pairs').callsPerUnit;
  const callsB = scenarioOf(baseline).callsPerUnit;
  // floor-http's unit is one request; a floor "pair" is two of them, as a keyholder pair is two requests.
  const pairOf = baseline === 'floor-http' ? 2 : 1;
  return {
    perPair: perRound(a, b, (x, y) => x.unitsPerSecond / (y.unitsPerSecond / pairOf)),
    perRequest: perRound(a, b, (x, y) => (x.unitsPerSecond * callsA) / (y.unitsPerSecond * callsB)),
  };
}

export function targets(report: Report): Target[] {
  const r = report.results;
  const list: Target[] = [];
  const pairs50 = rounds(r, 'pairs', 50);
  list.push({
    name: 'throughput ÷ floor-lock (c=50)',
    units: 'a pair on each side: acquire + release, 2 HTTP requests',
    goal: '≥ 0.75',
    on: 'per pair',
    ...throughputRatios(r, 50, 'floor-lock'),
    digits: 3,
    met: (v) => v >= 0.75,
  });
  list.push({
    name: 'throughput ÷ floor-http (c=50)',
    units: 'keyholder pair = 2 requests; floor pair = 2 floor requests',
    goal: '≥ 0.70',
    on: 'per pair',
    ...throughputRatios(r, 50, 'floor-http'),
    digits: 3,
    met: (v) => v >= 0.7,
  });
  const cpuVsFloor = perRound(pairs50, rounds(r, 'floor-lock', 50), (x, y) => {
    const a = perThousand(x.serverCpuSeconds, x.units);
    const b = perThousand(y.serverCpuSeconds, y.units);
    return a === undefined || b === undefined || b === 0 ? undefined : a / b;
  });
  list.push({
    name: 'server CPU per pair ÷ floor-lock (c=50)',
    units: 'a pair on each side: user+system CPU of the serving process',
    goal: '≤ 1.35',
    on: 'per pair',
    perRequest: cpuVsFloor,
    perPair: cpuVsFloor,
    digits: 2,
    met: (v) => v <= 1.35,
  });
  const p99 = perRound(pairs50, rounds(r, 'floor-http', 50), (x, y) =>
    x.latency.acquire && y.latency.request ? x.latency.acquire.p99 / y.latency.request.p99 : undefined,
  );
  list.push({
    name: 'p99 latency ÷ floor-http p99 (c=50)',
    units: 'one acquire request against one floor request',
    goal: '≤ 3',
    on: 'per request',
    perRequest: p99,
    perPair: [],
    digits: 2,
    met: (v) => v <= 3,
  });
  for (const c of report.settings.concurrencies) {
    if (rounds(r, 'peer-etcd', c).length === 0) continue;
    list.push({
      name: `throughput ÷ peer-etcd (c=${c})`,
      units: 'keyholder pair = 2 requests; etcd pair = 3 calls (lease grant, lock, unlock)',
      goal: '≥ 3',
      on: 'per pair',
      ...throughputRatios(r, c, 'peer-etcd'),
      digits: 2,
      met: (v) => v >= 3,
    });
  }
  for (const c of report.settings.concurrencies) {
    const cpu = perRound(rounds(r, 'pairs', c), rounds(r, 'floor-lock', c), (x, y) => {
      const a = perThousand(x.redisCpuSeconds, x.units);
      const b = perThousand(y.redisCpuSeconds, y.units);
      return a === undefined || b === undefined || b === 0 ? undefined : a / b;
    });
    list.push({
      name: `Redis CPU ÷ floor-lock (c=${c})`,
      units: 'a pair on each side (2 requests)',
      goal: '≤ 1.5',
      on: 'per pair',
      perRequest: cpu,
      perPair: cpu,
      digits: 2,
      met: (v) => v <= 1.5,
    });
  }
  const inScripts = perRound(pairs50, rounds(r, 'floor-lock', 50), (x, y) => {
    const a = commandsPerPair(x);
    const b = commandsPerPair(y);
    return a && b && b.inScripts > 0 ? a.inScripts / b.inScripts : undefined;
  });
  list.push({
    name: 'Redis commands inside scripts ÷ floor-lock (c=50)',
    units: 'commands per pair (INFO commandstats)',
    goal: '≤ 1.5',
    on: 'per pair',
    perRequest: inScripts,
    perPair: inScripts,
    digits: 2,
    met: (v) => v <= 1.5,
  });
  const calls = pairs50.map((x) => commandsPerPair(x)?.topLevel).filter((v): v is number => v !== undefined);
  list.push({
    name: 'Redis calls per pair (c=50)',
    units: 'top-level commands (script calls and any other) per acquire + release',
    goal: '= 2 (one script each)',
    on: 'per pair',
    perRequest: calls,
    perPair: calls,
    digits: 2,
    // Stray calls (a heartbeat, a health check) within the window may add a few hundredths.
    met: (v) => v < 2.05,
  });
  return list;
}

/**
 * Commands a client sends and no script of keyholder or the floors runs: anything else counted in a
 * window is taken as run inside a script (INFO commandstats does not tell the two apart).
 */
const TOP_LEVEL_ONLY = new Set([
  'evalsha',
  'eval',
  'fcall',
  'function|load',
  'ping',
  'wait',
  'scan',
  'subscribe',
  'select',
  'client',
  'script',
  'hello',
  'info',
  'memory',
]);

/** From INFO commandstats deltas: top-level calls, commands run inside scripts, and each command, per unit. */
export function commandsPerPair(x: LoopResult): { topLevel: number; inScripts: number; each: Record<string, number> } | undefined {
  if (!x.redisCommands || x.units === 0) return undefined;
  let topLevel = 0;
  let inScripts = 0;
  const each: Record<string, number> = {};
  for (const [name, calls] of Object.entries(x.redisCommands)) {
    const per = calls / x.units;
    each[name] = per;
    if (TOP_LEVEL_ONLY.has(name)) topLevel += per;
    else inScripts += per;
  }
  return { topLevel, inScripts, each };
}

function commandsTable(report: Report): string {
  const lines = [
    '| scenario | c | Redis calls per pair | commands inside scripts per pair | Redis CPU µs per pair | breakdown per pair (median round) |',
    '| --- | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const c of report.settings.concurrencies) {
    for (const id of ['pairs', 'floor-lock', 'floor-redis', 'peer-redis-semaphore'] as const) {
      const rs = rounds(report.results, id, c);
      const per = rs.map(commandsPerPair);
      if (per.every((p) => p === undefined)) continue;
      const inScripts = per.map((p) => p?.inScripts);
      const mid = per[Math.floor((per.length - 1) / 2)];
      const breakdown = mid
        ? Object.entries(mid.each)
            .sort((a, b) => b[1] - a[1])
            .filter(([, v]) => v >= 0.005)
            .map(([k, v]) => `${k} ${num(v, 2)}`)
            .join(', ')
        : '';
      lines.push(
        `| ${scenarioOf(id).name} | ${c} | ${spread(
          per.map((p) => p?.topLevel),
          2,
        )} | ${spread(inScripts, 2)} | ` +
          `${spread(
            rs.map((x) => (x.redisCpuSeconds === undefined || x.units === 0 ? undefined : (x.redisCpuSeconds / x.units) * 1e6)),
            1,
          )} | ${breakdown} |`,
      );
    }
  }
  return lines.join('\n');
}

/** Bytes per former lock that Redis's allocator may keep after every key is gone (not state keyholder leaves). */
export const IDLE_RESIDUE_MAX_BYTES = 8;

function targetsTable(report: Report): string {
  const lines = ['| target | units compared | per request | per pair | goal | met |', '| --- | --- | ---: | ---: | --- | --- |'];
  for (const t of targets(report)) {
    const values = t.on === 'per pair' ? t.perPair : t.perRequest;
    const met = values.length === 0 ? 'n/a' : t.met(median(values)) ? 'yes' : '**no**';
    lines.push(
      `| ${t.name} | ${t.units} | ${spread(t.perRequest, t.digits)} | ${spread(t.perPair, t.digits)} | ${t.goal} ${t.on} | ${met} |`,
    );
  }
  const m = report.memory;
  if (m) {
    const perLock = (m.heldBytes - m.baselineBytes) / m.locks;
    const perIdle = (m.afterGraceBytes - m.baselineBytes) / m.locks;
    lines.push(
      `| Redis memory per held lock | ${num(m.locks, 0)} locks held | – | – | ≤ 200 B; measured ${num(perLock, 0)} B | ${perLock <= 200 ? 'yes' : '**no**'} |`,
    );
    lines.push(
      `| Redis memory per idle key after the grace | ${num(m.locks, 0)} released locks | – | – | 0 keys left and ≤ ${IDLE_RESIDUE_MAX_BYTES} B per former lock; ` +
        `measured ${m.keysAfterGrace} keys, ${num(perIdle, 1)} B | ${m.keysAfterGrace === 0 && perIdle <= IDLE_RESIDUE_MAX_BYTES ? 'yes' : '**no**'} |`,
    );
  }
  return lines.join('\n');
}

function memorySection(m: MemoryResult, graceMs: number): string {
  const per = (bytes: number) => num((bytes - m.baselineBytes) / m.locks, 1);
  return [
    `${num(m.locks, 0)} locks held at once (no holder label; namespace quota on, so its slots are counted too), INFO memory used_memory against the baseline before ` +
      '(taken after one warm-up acquire and release whose keys are then gone, so the scripts are loaded already):',
    '',
    '| state | used_memory | per lock | keys |',
    '| --- | ---: | ---: | ---: |',
    `| baseline | ${num(m.baselineBytes, 0)} B | | |`,
    `| ${num(m.locks, 0)} locks held | ${num(m.heldBytes, 0)} B | ${per(m.heldBytes)} B | ${m.locks} |`,
    `| just released (fencing token kept for FENCE_GRACE_MS=${graceMs}) | ${num(m.releasedBytes, 0)} B | ${per(m.releasedBytes)} B | ${m.keysAfterRelease} |`,
    `| after the grace (all gone ${num(m.msUntilGone, 0)} ms after release) | ${num(m.afterGraceBytes, 0)} B | ${per(m.afterGraceBytes)} B | ${m.keysAfterGrace} |`,
    '',
    `One held lock's record: ${m.recordBytesOfOneLock ?? '?'} bytes, encoding ${m.encodingOfOneLock ?? '?'}; its MEMORY USAGE ${m.memoryUsageOfOneLock} B ` +
      "(Redis's estimate of key, value and key-table entry, without the expiry entry and the tables' slots). " +
      'MEMORY STATS fields that moved, bytes per lock (held / after the grace): ' +
      Object.entries(m.statsDeltaPerLock)
        .map(([field, [held, after]]) => `${field} ${num(held, 1)} / ${num(after, 1)}`)
        .join(', ') +
      '.',
  ].join('\n');
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** Non-200 answers of all rounds by kind ("12 × acquire 503 overloaded (event loop delay)"), or 0. */
export function errorKinds(rs: readonly LoopResult[]): string {
  const errors: Record<string, number> = {};
  for (const r of rs) for (const [name, n] of Object.entries(r.errors)) errors[name] = (errors[name] ?? 0) + n;
  const kinds = Object.entries(errors);
  return kinds.length === 0 ? '0' : kinds.map(([name, n]) => `${n} × ${name}`).join(', ');
}

function waitingSection(report: Report): string {
  const out: string[] = [];
  const hot = report.settings.concurrencies.map((c) => ({ c, rs: rounds(report.results, 'hot', c) })).filter((h) => h.rs.length > 0);
  if (hot.length > 0) {
    out.push('Hand-off under load (hot-key scenario: every client waits on one key, takes it, releases at once):', '');
    out.push(
      '| clients | hand-offs/s | acquire p50 / p99 ms | release answered → next 200, p50 / p99 ms | release sent → next 200, p50 / p99 ms | grants before the release answer | server CPU µs per hand-off | errors (all rounds) |',
    );
    out.push('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
    for (const { c, rs } of hot) {
      const a = rs.map((r) => r.handOffFromReleaseAnswered);
      const s = rs.map((r) => r.handOffFromReleaseSent);
      const before = rs.reduce((n, r) => n + (r.grantsBeforeReleaseAnswer ?? 0), 0);
      const total = rs.reduce((n, r) => n + (r.handOffFromReleaseAnswered?.count ?? 0), 0);
      out.push(
        `| ${c} | ${spread(
          rs.map((r) => r.unitsPerSecond),
          0,
        )} | ${spread(
          rs.map((r) => r.latency.acquire?.p50),
          1,
        )} / ${spread(
          rs.map((r) => r.latency.acquire?.p99),
          1,
        )} | ${spread(
          a.map((x) => x?.p50),
          2,
        )} / ${spread(
          a.map((x) => x?.p99),
          2,
        )} | ` +
          `${spread(
            s.map((x) => x?.p50),
            2,
          )} / ${spread(
            s.map((x) => x?.p99),
            2,
          )} | ${total ? num((100 * before) / total, 0) : 0} % | ${spread(
            rs.map((r) => (r.serverCpuSeconds === undefined ? undefined : (r.serverCpuSeconds * 1e6) / Math.max(1, r.units))),
            0,
          )} | ${errorKinds(rs)} |`,
      );
    }
    out.push('');
  }
  if (report.chains.length > 0) {
    out.push(
      'A queue drained by hand-offs (N waiters queued on one key, then the holder releases; each waiter releases as soon as it is granted):',
      '',
    );
    out.push(
      '| waiters queued | hand-offs | release answered → next 200, p50 / p99 ms | release sent → next 200, p50 / p99 ms | Redis commands per hand-off (all) | script calls per hand-off | breakdown per hand-off |',
    );
    out.push('| ---: | ---: | ---: | ---: | ---: | ---: | --- |');
    for (const ch of report.chains) {
      const breakdown = Object.entries(ch.commandBreakdown)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${num(v, 2)}`)
        .join(', ');
      out.push(
        `| ${num(ch.waiters, 0)}${ch.overloadedRetries ? ` (${ch.overloadedRetries} refused 503 overloaded while queueing, retried)` : ''} | ${ch.handOffs}${ch.failures ? ` (${ch.failures} failed)` : ''} | ${num(ch.handOffFromReleaseAnswered.p50, 2)} / ${num(ch.handOffFromReleaseAnswered.p99, 2)} | ` +
          `${num(ch.handOffFromReleaseSent.p50, 2)} / ${num(ch.handOffFromReleaseSent.p99, 2)} | ${num(ch.commandsPerHandOff, 1)} | ${num(ch.scriptCallsPerHandOff, 2)} | ${breakdown} |`,
      );
    }
    out.push('');
  }
  const e = report.expiry;
  if (e && e.samples.length > 0) {
    out.push(
      `Grant delay after a crashed holder's lease expires (holder never releases; lease end on the Redis clock → waiter's 200), ` +
        `${e.samples.length} samples${e.failures ? `, ${e.failures} failed` : ''}: ` +
        `median ${num(median(e.samples), 1)} ms, p99 ${num(percentile(e.samples, 99), 1)} ms, min ${num(Math.min(...e.samples), 1)} ms, max ${num(Math.max(...e.samples), 1)} ms.`,
    );
  }
  return out.join('\n');
}

export function renderReport(report: Report, memoryGraceMs: number): string {
  const m = report.machine;
  const s = report.settings;
  const parts = [
    '## keyholder benchmark',
    '',
    `Machine: ${m.cpus} CPUs (${m.cpuModel}), Node ${m.node}, Redis ${m.redis}${m.etcd ? `, etcd ${m.etcd}` : ', etcd not installed (peer-etcd skipped)'}. ` +
      `Load average (1/5/15 min) before: ${m.loadBefore}; after: ${m.loadAfter}. Started ${m.date}; \`${m.command}\`.`,
    `${s.rounds} round(s); each scenario ${s.warmMs} ms warm-up then ${s.durationMs} ms measured, at concurrency ${s.concurrencies.join(' and ')}. ` +
      'Cells: median over rounds (min–max). CPU: user+system seconds of the process per 1,000 units of the throughput column. ' +
      'Units: ' +
      SCENARIOS.map((x) => `${x.name}: ${x.calls}`).join('; ') +
      '.',
    '',
    resultsTable(report),
    '',
    '### Targets',
    '',
    targetsTable(report),
    '',
    '### Peers',
    '',
    peersTable(report),
    '',
    '### Redis commands per lock pair',
    '',
    'INFO commandstats deltas over the measured window, per pair. Redis calls: script calls (EVALSHA/EVAL) and other commands ' +
      'only a client sends; everything else is counted as run inside a script. CPU: redis-server user+system time.',
    '',
    commandsTable(report),
    '',
  ];
  if (report.memory) parts.push('### Redis memory', '', memorySection(report.memory, memoryGraceMs), '');
  parts.push('### Waiting', '', waitingSection(report), '');
  if (report.watches && report.watches.length > 0) parts.push('### Watch', '', watchSection(report.watches), '');
  return parts.join('\n');
}

/** Blocking queries: wake-up time and Redis work per change, by number of watchers on the key. */
function watchSection(watches: readonly WatchResult[]): string {
  const out = [
    'Blocking queries on one key (`GET /v1/locks/{key}?index=N&waitMs=60000`, one connection each, read by separate client ' +
      'processes over plain sockets), woken by a change (alternately a grant and a release); the time is from sending the change ' +
      "to the first bytes of each answer, pooled over the changes (one unmeasured change first warms the path up); each change's own " +
      'p99 is listed too. Target: every watcher within 50 ms at p99 with 1,000 watchers (the pooled p99), and O(1) Redis work per change.',
    '',
    '| watchers | client processes | changes | change sent → watcher answered, p50 / p99 / max ms | p99 of each change, ms | 50 ms at p99 | Redis commands per change (all) | breakdown per change |',
    '| ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |',
  ];
  for (const w of watches) {
    const breakdown = Object.entries(w.commandBreakdown)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${num(v, 1)}`)
      .join(', ');
    out.push(
      `| ${num(w.watchers, 0)} | ${w.clients ?? 1} | ${w.changes}${w.failures ? ` (${w.failures} failed answers)` : ''} | ` +
        `${num(w.wake.p50, 1)} / ${num(w.wake.p99, 1)} / ${num(w.wake.max, 1)} | ${(w.perChangeP99 ?? []).map((p) => num(p, 0)).join(', ') || '–'} | ${w.wake.p99 <= 50 ? 'yes' : 'no'} | ` +
        `${num(w.commandsPerChange, 1)} | ${breakdown} |`,
    );
  }
  return out.join('\n');
}
