import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { hashApiKey, newApiKey } from '../src/auth/api-keys.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import type {
  ChainResult,
  ExpiryResult,
  LoopResult,
  LoopScenario,
  MemoryResult,
  Task,
  TaskResult,
  WatchResult,
  WorkerMessage,
} from './protocol.js';
import {
  benchDir,
  etcdInstalled,
  etcdVersion,
  removeDir,
  ROOT,
  startEtcd,
  startFloorHttp,
  startFloorLock,
  startKeyholder,
  startLiveMutexBroker,
  type OwnedProcess,
} from './procs.js';
import { renderReport, type Report, type Results } from './report.js';
import { measureBackends, renderBackends, type BackendRow } from './backends.js';
import { renderProfile, summariseProfiles } from './profile.js';
import { DEFAULT_BURST, measureBurst } from './burst.js';
import type { BurstResult } from '../test/helpers/burst.js';
import { measureTracing, renderTracing } from './tracing.js';
import { measureHistory } from './history.js';
import { measureHotKey, renderHotKey } from './hotkey.js';

/**
 * `npm run bench [-- --quick]`: starts its own redis-server, keyholder (built, production settings),
 * a bare-Fastify floor, the naive lock floor, the peers (live-mutex's broker; redis-semaphore runs in
 * the load process) and, when installed, etcd, all on loopback; drives them from a separate load
 * process; prints a Markdown report on stdout and a progress line on stderr, and keeps the report and
 * its raw JSON in bench/results/ (one pair of files per run, plus latest.md and latest.json).
 */

const ALL_SCENARIOS: LoopScenario[] = [
  'floor-http',
  'floor-lock',
  'pairs',
  'semaphore',
  'floor-redis',
  'renew',
  'hot',
  'peer-etcd',
  'peer-live-mutex',
  'peer-redis-semaphore',
];

const USAGE = `npm run bench -- [options]

  --quick             one short round at concurrency 50 (about a minute on an idle 2-core machine)
  --rounds N          rounds of every scenario (default 5; 1 with --quick)
  --duration-ms MS    measured window per scenario (default 5000; 1500 with --quick)
  --scenarios a,b     loop scenarios to run (default all: ${ALL_SCENARIOS.join(', ')})
  --concurrency a,b   client concurrencies (default 50,200; 50 with --quick)
  --no-waiting        skip the queue-draining and lease-expiry measurements
  --no-memory         skip the Redis memory measurement
  --no-watch          skip the blocking-query (watch) fan-out measurement
  --only PART         run one part only: loops, memory, waiting, watch or backends (only the processes it
                      needs are started; with --profile, the keyholder instance that part uses is profiled)
  --only burst        only the overload burst (not part of a full run): --callers callers at once (default
                      3000) acquire one held lock with waitMs over three instances; the answer mix and
                      /livez latency, printed (and written with --out)
  --only tracing      only the tracing A/B (not part of a full run): lock pairs on three instances, tracing
                      off (never loaded), on with nothing sampled, on with every call exported over OTLP;
                      pairs/s and server CPU per pair, --rounds rounds (default 5) at the first --concurrency
  --only history      only the lease history A/B (not part of a full run): pairs/s and CPU per pair with
                      HISTORY=on and off, alternating (--rounds, default 4), Redis CPU and calls per pair,
                      and the bytes per event it writes to Redis; with --profile, both instances profiled
  --only hotkey       only the hot-key hand-offs (not part of a full run): --rounds rounds (default 5) at each
                      --concurrency, each build on its own redis-server; with --baseline DIR[,DIR...], the
                      builds in DIR (checkouts with \`npm run build\` done) take turns with this one (an
                      A/B); with --profile, every instance profiled
  --only ab           --only hotkey's A/B for another loop scenario: the first of --scenarios (default pairs),
                      this build and each --baseline build taking turns, each on its own redis-server
  --baseline DIRS     the other builds of --only hotkey, --only ab or --only burst (one burst each, after
                      this build's: a before/after), comma-separated
  --reverse-start     --only hotkey: start the processes last build first; --only history: start the
                      HISTORY=off instance first in odd rounds (both are restarted every round, the
                      start order alternating; by default HISTORY=on starts first in odd rounds)
  --pin               --only history: both instances on one CPU set, Redis and the load worker on the
                      other, with taskset (see bench/pin.ts; default: unpinned)
  --callers N         callers of the burst
  --stress-cpu N      run stress-ng --cpu N beside the burst (a host starved of CPU; 0: none, the default)
  --profile           run keyholder under --cpu-prof and add a summary (self time by package and by
                      keyholder function) to the report; the profiles stay in .tmp/bench-profiles/<date>/
  --out FILE          write the report to FILE (and FILE.json) instead of bench/results/
  --no-save           do not write any file
  --help              this text
`;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    'duration-ms': { type: 'string' },
    scenarios: { type: 'string' },
    concurrency: { type: 'string' },
    'no-waiting': { type: 'boolean', default: false },
    'no-memory': { type: 'boolean', default: false },
    'no-watch': { type: 'boolean', default: false },
    'no-backends': { type: 'boolean', default: false },
    only: { type: 'string' },
    callers: { type: 'string' },
    'stress-cpu': { type: 'string' },
    profile: { type: 'boolean', default: false },
    baseline: { type: 'string' },
    'reverse-start': { type: 'boolean', default: false },
    pin: { type: 'boolean', default: false },
    out: { type: 'string' },
    'no-save': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const RESULTS_DIR = join(ROOT, 'bench/results');

/** The parts of a run, each skipped by its --no-* flag or by an --only naming another part. */
const PARTS = ['loops', 'memory', 'waiting', 'watch', 'backends'] as const;
type Part = (typeof PARTS)[number];
const STANDALONE = ['burst', 'tracing', 'history', 'hotkey', 'ab'];
if (args.only !== undefined && !STANDALONE.includes(args.only) && !(PARTS as readonly string[]).includes(args.only)) {
  process.stderr.write(`--only takes one of ${[...PARTS, ...STANDALONE].join(', ')}\n\n${USAGE}`);
  process.exit(2);
}
function runs(part: Part): boolean {
  if (args.only !== undefined) return args.only === part;
  return part === 'loops' || !args[`no-${part}`];
}
/** The instance --profile profiles: the second one when only the parts measured on it run. */
const profiledAux = args.only === 'memory' || args.only === 'waiting' || args.only === 'watch';

const quick = args.quick ?? false;
const settings = {
  rounds: Number(args.rounds ?? (quick ? 1 : 5)),
  warmMs: quick ? 300 : 1000,
  durationMs: Number(args['duration-ms'] ?? (quick ? 1500 : 5000)),
  concurrencies: args.concurrency ? args.concurrency.split(',').map(Number) : quick ? [50] : [50, 200],
};
const selected = args.scenarios ? (args.scenarios.split(',') as LoopScenario[]) : ALL_SCENARIOS;
/** The scenarios that are one lock pair each on the bench's Redis: their Redis commands per pair are counted. */
const REDIS_PAIR_SCENARIOS: readonly LoopScenario[] = ['pairs', 'floor-lock', 'floor-redis', 'peer-redis-semaphore'];
/** The memory measurement's grace: short, so the idle keys are seen to disappear. */
const MEMORY_FENCE_GRACE_MS = 1000;

const tty = process.stderr.isTTY;
function progress(line: string): void {
  if (tty) process.stderr.write(`\r\x1b[K${line}`);
  else process.stderr.write(`${line}\n`);
}

class LoadWorker {
  private readonly child: ChildProcess;
  constructor() {
    this.child = fork(join(ROOT, 'bench/load-worker.ts'), [], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('load worker has no pid');
    return this.child.pid;
  }

  run<T extends TaskResult>(task: Task): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`load worker exited (${code}) during ${task.kind}`));
      this.child.once('exit', onExit);
      this.child.once('message', (message: WorkerMessage) => {
        this.child.off('exit', onExit);
        if (message.ok) resolve(message.result as T);
        else reject(new Error(`load worker failed: ${message.error}`));
      });
      this.child.send(task);
    });
  }

  stop(): void {
    this.child.disconnect();
  }
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

function cpuModel(): string {
  const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
  return match?.[1]?.trim() ?? 'unknown';
}

function redisVersion(): string {
  const out = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout ?? '';
  return /v=(\S+)/.exec(out)?.[1] ?? 'unknown';
}

/** `--only burst`: its own processes, its own short report. */
async function burstOnly(): Promise<void> {
  const loadBefore = loadAverage();
  const settings = {
    ...DEFAULT_BURST,
    ...(args.callers ? { callers: Number(args.callers) } : {}),
    ...(args['stress-cpu'] ? { stressCpu: Number(args['stress-cpu']) } : {}),
  };
  // This build, then each --baseline build (a before/after), one burst each on its own Redis.
  const runs: { build: string; result: BurstResult; text: string }[] = [];
  for (const build of [ROOT, ...(args.baseline === undefined ? [] : args.baseline.split(','))]) {
    const { result, text } = await measureBurst(settings, benchDir(), progress, build);
    runs.push({ build, result, text });
  }
  progress('done\n');
  const header = `${cpuModel()}, ${availableParallelism()} CPUs, Node ${process.versions.node}, Redis ${redisVersion()}; load ${loadBefore} before, ${loadAverage()} after\n\n`;
  const text = runs.map((r) => r.text).join('\n');
  process.stdout.write(header + text);
  if (args.out) {
    writeFileSync(args.out, header + text);
    writeFileSync(
      `${args.out}.json`,
      `${JSON.stringify({ settings, runs: runs.map(({ build, result }) => ({ build, result })) }, null, 1)}\n`,
    );
  }
}

/** `--only tracing`: its own Redis and instances, its own short report. */
async function tracingOnly(): Promise<void> {
  const loadBefore = loadAverage();
  const tracingSettings = {
    rounds: Number(args.rounds ?? (quick ? 1 : 5)),
    warmMs: settings.warmMs,
    durationMs: settings.durationMs,
    concurrency: settings.concurrencies[0] ?? 50,
  };
  // Production settings, as the loops: one API key, a rate limit the load never reaches.
  const dir = benchDir();
  const apiKey = newApiKey();
  const keysFile = join(dir, 'api-keys.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [{ id: 'bench', hash: hashApiKey(apiKey), namespace: 'bench', scopes: ['locks'] }] }));
  process.env.KEYHOLDER_BENCH_API_KEY = apiKey;
  const worker = new LoadWorker();
  try {
    const access = { KEYHOLDER_API_KEYS_FILE: keysFile, RATE_LIMIT_MAX: '10000000' };
    const result = await measureTracing(tracingSettings, dir, access, (task) => worker.run<LoopResult>(task), progress);
    progress('done\n');
    const header =
      `${cpuModel()}, ${availableParallelism()} CPUs, Node ${process.versions.node}, Redis ${redisVersion()}; ` +
      `load ${loadBefore} before, ${loadAverage()} after\n\n`;
    const text = `${header}### Tracing\n\n${renderTracing(result, tracingSettings)}`;
    process.stdout.write(text);
    if (args.out) {
      writeFileSync(args.out, text);
      writeFileSync(`${args.out}.json`, `${JSON.stringify({ settings: tracingSettings, result }, null, 1)}\n`);
    }
  } finally {
    worker.stop();
  }
}

/** `--only history`: the lease history A/B, its own processes, its own short report. */
async function historyOnly(): Promise<void> {
  const loadBefore = loadAverage();
  const owned: OwnedProcess[] = [];
  // The worker reads its API key when it starts: the key exists before the fork (a key set after it
  // left every call unauthenticated, 401, and the history A/B at 0 pairs/s).
  const dir = benchDir();
  const apiKey = newApiKey();
  const keysFile = join(dir, 'api-keys-history.json');
  writeFileSync(
    keysFile,
    JSON.stringify({ keys: [{ id: 'bench', hash: hashApiKey(apiKey), namespace: 'bench', scopes: ['locks', 'admin'] }] }),
  );
  process.env.KEYHOLDER_BENCH_API_KEY = apiKey;
  // BENCH_ENV, as in a full run: keyholder variables for both instances, e.g. '{"HISTORY_FLUSH_MS":"5"}'.
  const experiment = JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>;
  const profileDir = join(ROOT, '.tmp/bench-profiles', new Date().toISOString().replace(/[:.]/g, '-'));
  const flags = (side: string) => (args.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, side)}`] : []);
  const worker = new LoadWorker();
  let measured: Awaited<ReturnType<typeof measureHistory>>;
  try {
    measured = await measureHistory(
      {
        rounds: quick ? 2 : Math.max(settings.rounds, 4),
        concurrency: settings.concurrencies[0] ?? 50,
        warmMs: settings.warmMs,
        durationMs: settings.durationMs,
        reverseStart: args['reverse-start'],
        warmUpMs: quick ? 1000 : 2000,
        pin: args.pin,
      },
      dir,
      { KEYHOLDER_API_KEYS_FILE: keysFile, RATE_LIMIT_MAX: '10000000', ...experiment },
      { on: flags('on'), off: flags('off') },
      worker,
      owned,
      progress,
    );
  } finally {
    worker.stop();
    // A profile is written when its process exits.
    await Promise.all(owned.map((p) => p.stop()));
  }
  const { result, text } = measured;
  progress('done\n');
  const header = `${cpuModel()}, ${availableParallelism()} CPUs, Node ${process.versions.node}, Redis ${redisVersion()}; load ${loadBefore} before, ${loadAverage()} after\n\n`;
  let report = header + text;
  if (args.profile) {
    for (const side of ['off', 'on']) {
      report += `\n### CPU profile, HISTORY=${side}\n\n${renderProfile(summariseProfiles(join(profileDir, side), ROOT))}\n`;
    }
  }
  process.stdout.write(report);
  if (args.out) {
    writeFileSync(args.out, report);
    writeFileSync(`${args.out}.json`, `${JSON.stringify(result, null, 1)}\n`);
  }
}

/** `--only hotkey`: hand-offs on one hot key, this build (and --baseline's), its own short report. */
async function hotKeyOnly(scenario: LoopScenario = 'hot'): Promise<void> {
  const loadBefore = loadAverage();
  const dir = benchDir();
  const apiKey = newApiKey();
  const keysFile = join(dir, 'api-keys-hotkey.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [{ id: 'bench', hash: hashApiKey(apiKey), namespace: 'bench', scopes: ['locks'] }] }));
  // Read by the worker when it starts: set before the fork.
  process.env.KEYHOLDER_BENCH_API_KEY = apiKey;
  const experiment = JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>;
  const hotSettings = {
    rounds: Number(args.rounds ?? (quick ? 1 : 5)),
    warmMs: settings.warmMs,
    durationMs: settings.durationMs,
    concurrencies: settings.concurrencies,
    baselines: args.baseline === undefined ? [] : args.baseline.split(','),
    reverseStart: args['reverse-start'],
    scenario,
    baselineEnv: JSON.parse(process.env.BENCH_BASELINE_ENV ?? '{}') as Record<string, string>,
  };
  const profileDir = join(ROOT, '.tmp/bench-profiles', new Date().toISOString().replace(/[:.]/g, '-'));
  const flags = (build: string) => (args.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, build)}`] : []);
  const worker = new LoadWorker();
  let rows: Awaited<ReturnType<typeof measureHotKey>>;
  try {
    const access = { KEYHOLDER_API_KEYS_FILE: keysFile, RATE_LIMIT_MAX: '10000000', ...experiment };
    rows = await measureHotKey(hotSettings, dir, access, (task) => worker.run<LoopResult>(task), progress, flags);
  } finally {
    worker.stop();
  }
  progress('done\n');
  const header =
    `${cpuModel()}, ${availableParallelism()} CPUs, Node ${process.versions.node}, Redis ${redisVersion()}; ` +
    `load ${loadBefore} before, ${loadAverage()} after\n\n`;
  let report = `${header}### ${scenario === 'hot' ? 'Hot key' : `A/B: ${scenario}`}\n\n${renderHotKey(rows, hotSettings)}`;
  if (args.profile) {
    for (const build of ['this', ...hotSettings.baselines.map((_, i) => `baseline-${i + 1}`)]) {
      report += `\n### CPU profile, ${build} build\n\n${renderProfile(summariseProfiles(join(profileDir, build), ROOT))}\n`;
    }
  }
  process.stdout.write(report);
  if (args.out) {
    writeFileSync(args.out, report);
    writeFileSync(`${args.out}.json`, `${JSON.stringify({ settings: hotSettings, rows }, null, 1)}\n`);
  }
}

async function main(): Promise<void> {
  if (args.only === 'burst') return burstOnly();
  if (args.only === 'tracing') return tracingOnly();
  if (args.only === 'history') return historyOnly();
  if (args.only === 'hotkey') return hotKeyOnly();
  if (args.only === 'ab') return hotKeyOnly(args.scenarios ? (selected[0] ?? 'pairs') : 'pairs');
  const loadBefore = loadAverage();
  const startedAt = new Date().toISOString();
  const dir = benchDir();
  const owned: OwnedProcess[] = [];
  let redis: RedisServer | undefined;
  let worker: LoadWorker | undefined;
  try {
    progress('starting redis-server, keyholder, floor-http, floor-lock, live-mutex' + (etcdInstalled() ? ', etcd' : ''));
    redis = await RedisServer.start();
    const redisPid = redis.pid as number;
    const profileDir = join(ROOT, '.tmp/bench-profiles', startedAt.replace(/[:.]/g, '-'));
    const nodeFlags = args.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
    // Production settings: API keys on (one key, as a service's worker pool would use), the rate
    // limiter on but with a ceiling the load never reaches (one key at full speed would otherwise be
    // measured against its own 429s), the per-namespace quota at its default.
    const apiKey = newApiKey();
    const keysFile = join(dir, 'api-keys.json');
    writeFileSync(
      keysFile,
      JSON.stringify({ keys: [{ id: 'bench', hash: hashApiKey(apiKey), namespace: 'bench', scopes: ['locks', 'admin'] }] }),
    );
    process.env.KEYHOLDER_BENCH_API_KEY = apiKey;
    // BENCH_ENV (a JSON object) adds keyholder variables for experiments, e.g. '{"NAMESPACE_MAX_HELD_LOCKS":"0"}'
    // to see what the quota costs. The figures in docs/performance.md were made without it.
    const experiment = JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>;
    // The quota stays on, with room for the memory part's 10,000 held locks: a sharded quota may refuse up
    // to a shard's share below its limit (docs/limits.md), and at 20,000 it is still counted inside the
    // lock scripts, as the default 10,000 is.
    const access = { KEYHOLDER_API_KEYS_FILE: keysFile, RATE_LIMIT_MAX: '10000000', NAMESPACE_MAX_HELD_LOCKS: '20000', ...experiment };
    const keyholder = await startKeyholder('keyholder', redis.url, dir, access, profiledAux ? [] : nodeFlags);
    owned.push(keyholder.proc);
    // A second instance for the memory and waiting figures: a short fencing grace (so idle keys are
    // seen to go) and room for 1,000 waiters on one key.
    // The quota is on (20,000, counted inside the lock scripts), so the memory figure includes its bookkeeping.
    const aux = await startKeyholder(
      'keyholder-aux',
      redis.url,
      dir,
      {
        ...access,
        REDIS_KEY_PREFIX: 'khaux:',
        FENCE_GRACE_MS: String(MEMORY_FENCE_GRACE_MS),
        WAITERS_PER_KEY_MAX: '1024',
      },
      profiledAux ? nodeFlags : [],
    );
    owned.push(aux.proc);
    // The floors and etcd serve the loop scenarios only.
    const floor = runs('loops') ? await startFloorHttp(dir) : undefined;
    if (floor) owned.push(floor.proc);
    const floorLock = runs('loops') ? await startFloorLock(dir, redis.url) : undefined;
    if (floorLock) owned.push(floorLock.proc);
    const etcd = runs('loops') && etcdInstalled() && selected.includes('peer-etcd') ? await startEtcd(dir) : undefined;
    if (etcd) owned.push(etcd.proc);
    const liveMutex = runs('loops') && selected.includes('peer-live-mutex') ? await startLiveMutexBroker(dir) : undefined;
    if (liveMutex) owned.push(liveMutex.proc);
    worker = new LoadWorker();

    let memory: MemoryResult | undefined;
    if (runs('memory')) {
      progress('memory: holding locks, releasing, waiting past the grace');
      memory = await worker.run<MemoryResult>({
        kind: 'memory',
        keyholderUrl: aux.url,
        redisUrl: redis.url,
        keyPrefix: 'khaux:',
        locks: quick ? 2_000 : 10_000,
        fenceGraceMs: MEMORY_FENCE_GRACE_MS,
      });
    }

    const results: Results = new Map();
    /** `pid`: the process whose CPU is the scenario's server CPU (none for the in-process library). */
    const targetOf = (s: LoopScenario): { url: string; pid?: number; proc?: OwnedProcess } | undefined => {
      switch (s) {
        case 'pairs':
        case 'semaphore':
        case 'hot':
        case 'renew':
          return { url: keyholder.url, pid: keyholder.proc.pid, proc: keyholder.proc };
        case 'floor-http':
          return floor ? { url: floor.url, pid: floor.proc.pid, proc: floor.proc } : undefined;
        case 'floor-lock':
          return floorLock ? { url: floorLock.url, pid: floorLock.proc.pid, proc: floorLock.proc } : undefined;
        case 'floor-redis':
          return { url: (redis as RedisServer).url, pid: redisPid };
        case 'peer-etcd':
          return etcd ? { url: etcd.url, pid: etcd.proc.pid, proc: etcd.proc } : undefined;
        case 'peer-live-mutex':
          return liveMutex ? { url: liveMutex.url, pid: liveMutex.proc.pid, proc: liveMutex.proc } : undefined;
        case 'peer-redis-semaphore':
          return { url: (redis as RedisServer).url };
      }
    };
    for (let round = 1; runs('loops') && round <= settings.rounds; round++) {
      for (const c of settings.concurrencies) {
        for (const scenario of ALL_SCENARIOS.filter((s) => selected.includes(s))) {
          const target = targetOf(scenario);
          if (!target) continue;
          progress(`round ${round}/${settings.rounds}  ${scenario} c=${c}  (load ${loadAverage()})`);
          const result = await worker.run<LoopResult>({
            kind: 'loop',
            scenario,
            target: target.url,
            concurrency: c,
            warmMs: settings.warmMs,
            durationMs: settings.durationMs,
            tag: `${round}-${c}-${Date.now()}`,
            serverPid: scenario === 'floor-redis' ? undefined : target.pid,
            redisPid: scenario === 'floor-http' || scenario === 'peer-etcd' || scenario === 'peer-live-mutex' ? undefined : redisPid,
            // Which Redis commands one unit costs, for the scenarios that are one lock pair each.
            ...(REDIS_PAIR_SCENARIOS.includes(scenario) ? { redisUrl: redis.url } : {}),
          });
          // Logs of a scenario are not kept: a full run would otherwise write gigabytes.
          target.proc?.truncateLog();
          let byC = results.get(scenario);
          if (!byC) results.set(scenario, (byC = new Map<number, LoopResult[]>()));
          byC.set(c, [...(byC.get(c) ?? []), result]);
          progress(
            `round ${round}/${settings.rounds}  ${scenario} c=${c}: ${result.unitsPerSecond.toFixed(0)}/s` +
              (Object.keys(result.errors).length ? `  errors ${JSON.stringify(result.errors)}` : ''),
          );
        }
      }
    }

    const chains: ChainResult[] = [];
    let expiry: ExpiryResult | undefined;
    if (runs('waiting')) {
      for (const [waiters, cycles] of [
        [1, quick ? 10 : 50],
        [100, quick ? 1 : 3],
        [1000, 1],
      ] as const) {
        progress(`waiting: draining a queue of ${waiters} waiter(s) × ${cycles}`);
        chains.push(
          await worker.run<ChainResult>({
            kind: 'chain',
            keyholderUrl: aux.url,
            redisUrl: redis.url,
            waiters,
            cycles,
            tag: String(Date.now()),
          }),
        );
      }
      progress('waiting: grant delay after a lease expires');
      expiry = await worker.run<ExpiryResult>({
        kind: 'expiry',
        keyholderUrl: aux.url,
        repeats: quick ? 3 : 20,
        ttlMs: 300,
        tag: String(Date.now()),
      });
    }

    const watches: WatchResult[] = [];
    if (runs('watch')) {
      for (const watchers of [1, 100, 1000]) {
        progress(`watch: ${watchers} blocking queries on one key, woken by each change`);
        watches.push(
          await worker.run<WatchResult>({
            kind: 'watch',
            keyholderUrl: aux.url,
            redisUrl: redis.url,
            watchers,
            changes: quick ? 2 : 6,
            tag: `${watchers}-${Date.now()}`,
          }),
        );
      }
    }

    let backends: BackendRow[] | undefined;
    const backendConcurrency = 50;
    if (runs('backends') && etcdInstalled()) {
      const w = worker;
      backends = await measureBackends({
        oneRedis: keyholder,
        dir,
        access,
        rounds: settings.rounds,
        warmMs: settings.warmMs,
        durationMs: settings.durationMs,
        concurrency: backendConcurrency,
        runLoop: (task) => w.run<LoopResult>(task),
        progress,
      });
    }

    const report: Report = {
      machine: {
        cpus: availableParallelism(),
        cpuModel: cpuModel(),
        node: process.versions.node,
        redis: redisVersion(),
        etcd: etcdInstalled() ? etcdVersion() : null,
        loadBefore,
        loadAfter: loadAverage(),
        date: startedAt,
        command: ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
      },
      settings,
      results,
      memory,
      chains,
      expiry,
      watches,
    };
    let text = renderReport(report, MEMORY_FENCE_GRACE_MS);
    if (backends) text += `\n### Backends\n\n${renderBackends(backends, backendConcurrency)}\n`;
    if (args.profile) {
      // The profile is written when the process exits.
      progress('profile: stopping keyholder to collect its CPU profile');
      await (profiledAux ? aux : keyholder).proc.stop();
      text += `\n### CPU profile\n\n${renderProfile(summariseProfiles(profileDir, ROOT))}\n`;
    }
    progress('done\n');
    process.stdout.write(text);
    const json = JSON.stringify(
      { ...report, results: Object.fromEntries([...results].map(([k, v]) => [k, Object.fromEntries(v)])) },
      null,
      1,
    );
    if (args.out) {
      writeFileSync(args.out, text);
      writeFileSync(`${args.out}.json`, json);
    } else if (!args['no-save']) {
      // One file per run, named by its start time, and latest.* for the documents that quote it.
      mkdirSync(RESULTS_DIR, { recursive: true });
      const stamp = report.machine.date.replace(/[:.]/g, '-');
      for (const name of [stamp, 'latest']) {
        writeFileSync(join(RESULTS_DIR, `${name}.md`), text);
        writeFileSync(join(RESULTS_DIR, `${name}.json`), `${json}\n`);
      }
      process.stderr.write(`written: bench/results/${stamp}.md, .json and bench/results/latest.md, .json\n`);
    }
  } finally {
    worker?.stop();
    for (const proc of owned.reverse()) await proc.stop().catch(() => undefined);
    await redis?.stop();
    removeDir(dir);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`\nbench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
