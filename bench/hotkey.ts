import { RedisServer } from '../test/helpers/redis-server.js';
import { removeDir, ROOT, startKeyholder, type Keyholder, type OwnedProcess } from './procs.js';
import type { LoopResult, LoopScenario, LoopTask } from './protocol.js';
import { commandsPerPair, errorKinds } from './report.js';

/**
 * `npm run bench -- --only hotkey [--baseline DIR[,DIR...]]`: hand-offs on one hot key (every caller acquires it
 * with waitMs, takes it, releases it at once), this build against other builds of keyholder (each DIR: a
 * checkout with `npm run build` done, e.g. a `git worktree add --detach` of an older commit). Each build
 * runs on its own redis-server, with the production settings of the loops (API keys, rate limiter,
 * quota, load shedding), so Redis CPU and INFO commandstats are each build's own. The builds take turns,
 * another one first each round, so a machine whose load drifts does not favour one; each figure
 * is the median of the rounds (min to max).
 */
export interface HotKeySettings {
  readonly rounds: number;
  readonly warmMs: number;
  readonly durationMs: number;
  readonly concurrencies: readonly number[];
  /** The other builds' checkouts (none: this build alone). */
  readonly baselines: readonly string[];
  /**
   * Start the processes last build first: a process started first has measured worse than an identical
   * one started after it (docs/performance.md), so an A/B is run in both start orders.
   */
  readonly reverseStart?: boolean;
  /**
   * The loop each build runs: 'hot' (the default, the hand-offs) or another loop scenario, e.g. 'pairs'
   * for an A/B of lock pairs on distinct keys (--only ab).
   */
  readonly scenario?: LoopScenario;
  /**
   * Keyholder variables for the baseline builds only (BENCH_BASELINE_ENV), on top of `access`: an A/B of
   * one setting on one build (--baseline naming this checkout), e.g. '{"NODE_OPTIONS":"--max-semi-space-size=16"}'.
   */
  readonly baselineEnv?: Record<string, string>;
}

export interface HotKeyRow {
  readonly build: string;
  readonly concurrency: number;
  readonly results: LoopResult[];
}

type RunLoop = (task: LoopTask) => Promise<LoopResult>;

export async function measureHotKey(
  settings: HotKeySettings,
  dir: string,
  access: Record<string, string>,
  runLoop: RunLoop,
  progress: (line: string) => void,
  nodeFlags: (build: string) => string[] = () => [],
): Promise<HotKeyRow[]> {
  const owned: OwnedProcess[] = [];
  const redises: RedisServer[] = [];
  const builds: Array<[string, string]> = [['this build', ROOT]];
  for (const dir of settings.baselines) builds.push([`baseline (${dir})`, dir]);
  try {
    const started = new Map<number, [string, Keyholder, RedisServer]>();
    const startOrder = [...builds.keys()];
    if (settings.reverseStart === true) startOrder.reverse();
    for (const i of startOrder) {
      const [name, root] = builds[i] as [string, string];
      const redis = await RedisServer.start();
      redises.push(redis);
      const env = i === 0 ? access : { ...access, ...settings.baselineEnv };
      const kh = await startKeyholder(`keyholder-hot-${i}`, redis.url, dir, env, nodeFlags(i === 0 ? 'this' : `baseline-${i}`), root);
      owned.push(kh.proc);
      started.set(i, [name, kh, redis]);
    }
    const instances = builds.map((_, i) => started.get(i) as [string, Keyholder, RedisServer]);
    const rows: HotKeyRow[] = [];
    for (const c of settings.concurrencies) for (const [name] of instances) rows.push({ build: name, concurrency: c, results: [] });
    for (let round = 1; round <= settings.rounds; round++) {
      for (const c of settings.concurrencies) {
        const order = instances.map((_, i) => (i + round - 1) % instances.length);
        for (const i of order) {
          const [name, kh, redis] = instances[i] as [string, Keyholder, RedisServer];
          progress(`${settings.scenario ?? 'hot'} round ${round}/${settings.rounds} c=${c}: ${name}`);
          const result = await runLoop({
            kind: 'loop',
            scenario: settings.scenario ?? 'hot',
            target: kh.url,
            concurrency: c,
            warmMs: settings.warmMs,
            durationMs: settings.durationMs,
            tag: `hotkey-${round}-${c}-${i}-${Date.now()}`,
            serverPid: kh.proc.pid,
            redisPid: redis.pid,
            redisUrl: redis.url,
          });
          kh.proc.truncateLog();
          rows.find((r) => r.build === name && r.concurrency === c)?.results.push(result);
          const errors = Object.keys(result.errors).length ? `  errors ${JSON.stringify(result.errors)}` : '';
          progress(
            `${settings.scenario ?? 'hot'} round ${round}/${settings.rounds} c=${c}: ${name}: ${result.unitsPerSecond.toFixed(0)}/s${errors}`,
          );
        }
      }
    }
    // Stopped here, before the report: a profile is written when its process exits.
    for (const proc of owned.splice(0).reverse()) await proc.stop();
    return rows;
  } finally {
    for (const proc of owned.reverse()) await proc.stop().catch(() => undefined);
    for (const redis of redises) await redis.stop();
    removeDir(dir);
  }
}

function median(values: number[]): number {
  const known = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (known.length === 0) return NaN;
  const mid = Math.floor(known.length / 2);
  return known.length % 2 ? (known[mid] as number) : ((known[mid - 1] as number) + (known[mid] as number)) / 2;
}

function cell(values: number[], digits: number): string {
  const known = values.filter((v) => Number.isFinite(v));
  if (known.length === 0) return 'n/a';
  const f = (v: number) => v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const m = f(median(known));
  return known.length === 1 ? m : `${m} (${f(Math.min(...known))}–${f(Math.max(...known))})`;
}

/** Each command per hand-off, in the round of median throughput. */
function breakdown(rs: readonly LoopResult[]): string {
  const sorted = [...rs].sort((a, b) => a.unitsPerSecond - b.unitsPerSecond);
  const mid = sorted[Math.floor((sorted.length - 1) / 2)];
  const each = mid ? commandsPerPair(mid)?.each : undefined;
  if (!each) return 'n/a';
  return Object.entries(each)
    .filter(([, n]) => n >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${n.toFixed(2)}`)
    .join(', ');
}

export function renderHotKey(rows: readonly HotKeyRow[], settings: HotKeySettings): string {
  const scenario = settings.scenario ?? 'hot';
  const env = Object.keys(settings.baselineEnv ?? {}).length
    ? `Baseline builds run with ${JSON.stringify(settings.baselineEnv)} added. `
    : '';
  const turns =
    `${settings.rounds} rounds of ${settings.durationMs / 1000} s per build and concurrency, taking turns; ` +
    `processes started ${settings.reverseStart === true ? 'last build first' : 'this build first'}; median of the rounds (min–max). `;
  const syscalls =
    'Syscalls: read and write calls of each process (syscr + syscw of /proc/<pid>/io, sockets and log file alike), ' +
    'per hand-off: a count the load on the machine does not change. ';
  const lines = [
    scenario === 'hot'
      ? `${env}Hand-offs on one hot key: c callers each acquire it with waitMs, take it and release it at once; ` +
        turns +
        'Hand-off: the release sent → the next caller’s 200. Server CPU: the keyholder process, user+system, per hand-off. ' +
        syscalls +
        'Redis commands: INFO commandstats deltas per hand-off (each hand-off is one release and one queued acquire of the caller that just let go).'
      : `${env}The ${scenario} loop (--only ab): each "hand-off" column below is per unit of that loop (for pairs: an acquire + ` +
        'release on one of 10,000 keys), and the hand-off latency is n/a. ' +
        turns +
        'Server CPU: the keyholder process, user+system, per unit. ' +
        syscalls.replace('hand-off', 'unit') +
        'Redis commands: INFO commandstats deltas per unit.',
    '',
    '| build | c | hand-offs/s | acquire p50 / p99 ms | hand-off p50 / p99 ms | server CPU µs per hand-off | Redis CPU µs per hand-off | read + write syscalls per hand-off, keyholder / Redis | Redis calls / commands in scripts per hand-off | commands per hand-off (median round) | errors |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
  ];
  for (const row of rows) {
    const rs = row.results;
    const errorText = errorKinds(rs);
    lines.push(
      `| ${row.build} | ${row.concurrency} | ${cell(
        rs.map((r) => r.unitsPerSecond),
        0,
      )} | ${cell(
        rs.map((r) => r.latency.acquire?.p50 ?? NaN),
        1,
      )} / ${cell(
        rs.map((r) => r.latency.acquire?.p99 ?? NaN),
        1,
      )} | ${cell(
        rs.map((r) => r.handOffFromReleaseSent?.p50 ?? NaN),
        2,
      )} / ${cell(
        rs.map((r) => r.handOffFromReleaseSent?.p99 ?? NaN),
        2,
      )} | ${cell(
        rs.map((r) => ((r.serverCpuSeconds ?? NaN) * 1e6) / Math.max(1, r.units)),
        0,
      )} | ${cell(
        rs.map((r) => ((r.redisCpuSeconds ?? NaN) * 1e6) / Math.max(1, r.units)),
        0,
      )} | ${cell(
        rs.map((r) => (r.serverIoCalls ?? NaN) / Math.max(1, r.units)),
        1,
      )} / ${cell(
        rs.map((r) => (r.redisIoCalls ?? NaN) / Math.max(1, r.units)),
        1,
      )} | ${cell(
        rs.map((r) => commandsPerPair(r)?.topLevel ?? NaN),
        2,
      )} / ${cell(
        rs.map((r) => commandsPerPair(r)?.inScripts ?? NaN),
        1,
      )} | ${breakdown(rs)} | ${errorText} |`,
    );
  }
  lines.push('', ...pairedRatios(rows, settings));
  return `${lines.join('\n')}\n`;
}

/**
 * This build against each baseline within each round (the builds ran back to back): a machine whose
 * load drifts moves both sides of a round alike, so the ratios scatter less than the medians above.
 */
function pairedRatios(rows: readonly HotKeyRow[], settings: HotKeySettings): string[] {
  const cpu = (r: LoopResult) => ((r.serverCpuSeconds ?? NaN) * 1e6) / Math.max(1, r.units);
  const out: string[] = [];
  for (const c of settings.concurrencies) {
    const atC = rows.filter((r) => r.concurrency === c);
    const [self, ...others] = atC;
    if (!self) continue;
    for (const other of others) {
      const n = Math.min(self.results.length, other.results.length);
      const ratio = (f: (r: LoopResult) => number) =>
        Array.from({ length: n }, (_, i) => f(self.results[i] as LoopResult) / f(other.results[i] as LoopResult));
      const cpuRatios = ratio(cpu);
      const lower = cpuRatios.filter((x) => x < 1).length;
      out.push(
        `Per round, c=${c}, ${self.build} ÷ ${other.build}: server CPU per unit ${cell(cpuRatios, 3)} (lower in ${lower} of ${n} rounds), ` +
          `units/s ${cell(
            ratio((r) => r.unitsPerSecond),
            3,
          )}.`,
      );
    }
  }
  return out;
}
