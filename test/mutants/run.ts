import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, matchesGlob, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { FOCUSED_PROOFS, type FocusedProof, PLANTED_MUTANTS, type PlantedMutant } from './mutants.js';
import { summariseStryker, type StrykerSummary } from './stryker-summary.js';

/**
 * `npm run test:mutants`: StrykerJS over src/domain and src/store, then every planted mutant
 * (mutants.ts) run against the safety tests, each in its own copy of the repository. Prints both
 * tables and writes reports/mutation/summary.md. Exits non-zero when a planted mutant survives, when
 * a `find` no longer matches, or when the TypeScript score is under the bar.
 *
 *   --skip-stryker     report on the last Stryker runs (reports/mutation/stryker-<part>.json) instead of new ones
 *   --parts a,b        run StrykerJS on these parts of the scope only (stryker.config.mjs PARTS; default all)
 *   --only id,id       plant only these mutants (the report is then not written)
 *   --concurrency n    planted mutants run at once (default 2)
 *   --runners n        StrykerJS test runners for every part (default: PART_RUNNERS, below)
 *   --incremental      StrykerJS reuses the results of the last run (reports/mutation/stryker-incremental-<part>.json)
 *                      for mutants whose code and covering tests did not change; the record says so
 *   --skip-focused     leave out the focused proofs (FOCUSED_PROOFS: one named test alone against its bug)
 *   --focused-only     only the focused proofs (with --only: those of these mutants); with --update-record
 *                      their rows replace those of the last planted run's record (marked with when they ran)
 *   --stryker-only     only StrykerJS (the parts of --parts), then the report
 *   --report-only      write reports/mutation/summary.md from the last runs' records (stryker-<part>.json and
 *                      .run.json, planted.run.json), run nothing
 */

/** Every test file here is part of `npm test`: what kills a planted mutant here, `npm test` catches too. */
export const SAFETY_TEST_FILES = [
  'test/unit/safety-core.test.ts',
  'test/unit/memory-store-rules.test.ts',
  'test/conformance/memory-store.test.ts',
  'test/conformance/redis-store.test.ts',
  'test/domain/lock-service.test.ts',
  'test/redis/late-reply.test.ts',
  'test/faults/reply-drop.test.ts',
  'test/redis/store-outage.test.ts',
  'test/redis/waiting-instances.test.ts',
  'test/http/waiting.test.ts',
  'test/unit/memory-store-clock.test.ts',
  'test/redis/store-state.test.ts',
  'test/redis/scripts.test.ts',
  'test/redis/quota-abort-handover.test.ts',
  'test/redis/quota-uncertain-acquire.test.ts',
  'test/redis/quota-set-key-renew.test.ts',
  'test/domain/idempotent-give-back.test.ts',
  'test/redis/permit-stale-release.test.ts',
  'test/redis/replica-acks-idempotency.test.ts',
  'test/http/late-answers-at-write.test.ts',
  'test/redis/quota-dead-waiter.test.ts',
];

/** The bar for StrykerJS's score over src/domain + src/store. */
const MIN_STRYKER_SCORE = 85;

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');
const REPORT_DIR = join(ROOT, 'reports/mutation');
const SANDBOXES = join(ROOT, '.tmp/planted');

// A reported run runs each part's whole list of tests (vitest.config.ts): never a few files chosen for
// a run aimed at some mutants.
delete process.env.STRYKER_TEST_FILES;

const { values: args } = parseArgs({
  options: {
    'skip-stryker': { type: 'boolean', default: false },
    only: { type: 'string' },
    concurrency: { type: 'string', default: '2' },
    runners: { type: 'string' },
    incremental: { type: 'boolean', default: false },
    parts: { type: 'string' },
    'skip-focused': { type: 'boolean', default: false },
    'focused-only': { type: 'boolean', default: false },
    'stryker-only': { type: 'boolean', default: false },
    'report-only': { type: 'boolean', default: false },
    'update-record': { type: 'boolean', default: false },
  },
});

interface PlantedResult {
  readonly mutant: PlantedMutant;
  readonly status: 'killed' | 'survived' | 'no-match';
  /** The first failing test ("file > suite > test"), or why the run failed without one. */
  readonly killedBy: string;
  readonly seconds: number;
}

/** A copy of the working tree (tracked and new files, not ignored ones) sharing node_modules. */
function makeSandbox(name: string): string {
  const dir = join(SANDBOXES, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const listed = spawnSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split('\0').filter(Boolean)) {
    if (!existsSync(join(ROOT, file))) continue; // deleted in the working tree
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(ROOT, file), join(dir, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** Applies the mutant; false when its `find` does not occur exactly once. */
function plant(dir: string, mutant: PlantedMutant): boolean {
  const path = join(dir, mutant.file);
  if (!existsSync(path)) return false;
  const source = readFileSync(path, 'utf8');
  const at = source.indexOf(mutant.find);
  if (at < 0 || source.indexOf(mutant.find, at + 1) >= 0) return false;
  writeFileSync(path, source.slice(0, at) + mutant.replace + source.slice(at + mutant.find.length));
  return true;
}

interface VitestJson {
  testResults: Array<{ name: string; status: string; message?: string; assertionResults: Array<{ fullName: string; status: string }> }>;
}

/** Runs the safety tests in `dir`, stopping at the first failure; returns the first failing test, or null if all passed. */
function runSafetyTests(dir: string, onReport?: (report: VitestJson) => void): Promise<string | null> {
  return runVitest(dir, ['--bail=1', ...SAFETY_TEST_FILES], onReport);
}

/** Runs vitest in `dir` with `args`; returns the first failing test ("file > name"), or null if all passed. */
function runVitest(dir: string, args: readonly string[], onReport?: (report: VitestJson) => void): Promise<string | null> {
  const out = join(dir, '.tmp/vitest-result.json');
  rmSync(out, { force: true });
  return new Promise((resolvePromise) => {
    const child = spawn(
      process.execPath,
      [
        join(ROOT, 'node_modules/vitest/vitest.mjs'),
        'run',
        '--config=test/mutants/vitest.safety.config.ts',
        '--reporter=json',
        `--outputFile=${out}`,
        ...args,
      ],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, NO_COLOR: '1' } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.on('exit', (code) => {
      if (onReport && existsSync(out)) onReport(JSON.parse(readFileSync(out, 'utf8')) as VitestJson);
      if (code === 0) return resolvePromise(null);
      try {
        const report = JSON.parse(readFileSync(out, 'utf8')) as VitestJson;
        for (const file of report.testResults) {
          const failed = file.assertionResults.find((a) => a.status === 'failed');
          const relative = file.name.startsWith(dir) ? file.name.slice(dir.length + 1) : file.name;
          if (failed) return resolvePromise(`${relative} > ${failed.fullName}`);
          if (file.status === 'failed') return resolvePromise(`${relative} (failed to run: ${(file.message ?? '').split('\n')[0]})`);
        }
      } catch {
        // No report: vitest itself failed.
      }
      resolvePromise(`vitest exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' / ')}`);
    });
  });
}

/**
 * The safety test files tried first for a mutant, before the whole set: the file of its focused proof,
 * the file that killed it in the last recorded run, and the files that test its source directly. A
 * kill there is a kill by a test of `npm test` (every one of these is in SAFETY_TEST_FILES); only a
 * mutant they all miss pays for the whole set.
 */
function firstTestFiles(mutant: PlantedMutant, lastKilledBy: ReadonlyMap<string, string>): string[] {
  const byPath: Array<[RegExp, string[]]> = [
    [/^src\/store\/redis\/scripts\//, ['test/redis/scripts.test.ts', 'test/conformance/redis-store.test.ts']],
    [/^src\/store\/(redis|shared)\//, ['test/conformance/redis-store.test.ts']],
    [
      /^src\/store\/memory\//,
      ['test/unit/memory-store-rules.test.ts', 'test/unit/memory-store-clock.test.ts', 'test/conformance/memory-store.test.ts'],
    ],
    [/^src\/domain\//, ['test/unit/safety-core.test.ts', 'test/domain/lock-service.test.ts']],
  ];
  const files = [
    ...FOCUSED_PROOFS.filter((p) => p.mutants.includes(mutant.id)).map((p) => p.testFile),
    ...[lastKilledBy.get(mutant.id)?.split(' ')[0] ?? ''],
    ...(byPath.find(([pattern]) => pattern.test(mutant.file))?.[1] ?? []),
  ];
  return [...new Set(files)].filter((f) => SAFETY_TEST_FILES.includes(f));
}

/** The file that killed each planted mutant in the last recorded run. */
function lastKills(): Map<string, string> {
  const last = readJson<PlantedRecord>(runRecordOf('planted'));
  return new Map((last?.planted ?? []).filter((p) => p.status === 'killed').map((p) => [p.id, p.killedBy]));
}

/** A planted mutant's result, and the result of each focused proof of it (its named test alone, with the mutant planted). */
async function runPlanted(mutant: PlantedMutant, first: readonly string[]): Promise<PlantedResult & { proofs: Map<FocusedProof, string> }> {
  const started = performance.now();
  const proofs = new Map<FocusedProof, string>();
  const dir = makeSandbox(mutant.id);
  const seconds = () => Math.round((performance.now() - started) / 1000);
  try {
    if (!plant(dir, mutant)) {
      for (const proof of FOCUSED_PROOFS.filter((p) => p.mutants.includes(mutant.id))) proofs.set(proof, 'no-match');
      return { mutant, status: 'no-match', killedBy: `find does not occur exactly once in ${mutant.file}`, seconds: 0, proofs };
    }
    // The named test of each focused proof alone first: its failure is the proof and the kill at once.
    for (const proof of FOCUSED_PROOFS.filter((p) => p.mutants.includes(mutant.id))) proofs.set(proof, await runNamedTest(dir, proof));
    const proven = [...proofs].find(([, status]) => status === 'failed');
    if (proven) return { mutant, status: 'killed', killedBy: `${proven[0].testFile} > ${proven[0].testName}`, seconds: seconds(), proofs };
    // Its own tests next, then, only if they all pass, every safety test file.
    const failure = (first.length > 0 ? await runVitest(dir, ['--bail=1', ...first]) : null) ?? (await runSafetyTests(dir));
    return { mutant, status: failure === null ? 'survived' : 'killed', killedBy: failure ?? '-', seconds: seconds(), proofs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface FocusedResult {
  readonly proof: FocusedProof;
  readonly mutant: string;
  /** How the named test ended on the unchanged code, then with the mutant planted. */
  readonly clean: string;
  readonly mutated: string;
  readonly seconds: number;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Runs one named test alone in `dir`; returns its status (passed, failed, or "not run" when no test has that name). */
async function runNamedTest(dir: string, proof: FocusedProof): Promise<string> {
  let status = 'not run';
  await runVitest(dir, [proof.testFile, '-t', `^${escapeRegExp(proof.testName)}$`], (report) => {
    for (const file of report.testResults) {
      const found = file.assertionResults.find((a) => a.fullName === proof.testName);
      if (found) status = found.status;
      else if (file.status === 'failed') status = `file failed to run: ${(file.message ?? '').split('\n')[0]}`;
    }
  });
  return status;
}

/** Each focused proof: its test passes on the code as it is, and fails with its mutant planted. */
async function runFocused(proof: FocusedProof, mutantId: string): Promise<FocusedResult> {
  const started = performance.now();
  const mutant = PLANTED_MUTANTS.find((m) => m.id === mutantId);
  if (!mutant) throw new Error(`focused proof names an unknown mutant ${mutantId}`);
  const dir = makeSandbox(`focused-${mutantId}`);
  try {
    const clean = await runNamedTest(dir, proof);
    if (!plant(dir, mutant)) return { proof, mutant: mutantId, clean, mutated: 'no-match', seconds: 0 };
    const mutated = await runNamedTest(dir, proof);
    return { proof, mutant: mutantId, clean, mutated, seconds: Math.round((performance.now() - started) / 1000) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function focusedTable(results: readonly FocusedResult[]): string {
  const rows = results.map(
    (r) =>
      `| ${r.proof.bug} | ${r.mutant} | \`${r.proof.testFile}\` > ${r.proof.testName} | ${r.clean} | **${r.mutated}** | ${r.seconds} |`,
  );
  return ['| bug | mutant | the test, run alone | without the mutant | with it | s |', '|---|---|---|---|---|---:|', ...rows].join('\n');
}

const focusedRow = (r: FocusedResult) => ({
  bug: r.proof.bug,
  mutant: r.mutant,
  testFile: r.proof.testFile,
  testName: r.proof.testName,
  clean: r.clean,
  mutated: r.mutated,
  seconds: r.seconds,
});

const proven = (r: FocusedResult) => r.clean === 'passed' && r.mutated === 'failed';

async function runAll<T, R>(items: readonly T[], concurrency: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await run(items[i] as T);
      process.stderr.write(`[planted] ${i + 1}/${items.length} done\n`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return results;
}

/** The parts StrykerJS's scope is run in (stryker.config.mjs PARTS), each with its own report. */
const STRYKER_PARTS = ['domain', 'memory', 'redis-codec', 'redis', 'etcd'] as const;
const strykerReportOf = (part: string) => join(REPORT_DIR, `stryker-${part}.json`);

/**
 * How one run (a StrykerJS part, or the planted mutants) went: kept beside its report, so parts run at
 * different times still report their own figures.
 */
interface RunRecord {
  readonly startedAt: string;
  readonly seconds: number;
  readonly commit: string;
  /** Load average (1 min) at the start and at the end; the machine is shared. */
  readonly loadBefore: number;
  readonly loadAfter: number;
  /** StrykerJS reused the last run's results for unchanged mutants (--incremental): not a from-scratch time. */
  readonly incremental?: boolean;
  /** StrykerJS test runners (processes) of the run. */
  readonly runners?: number;
  /** The part stalled with the kept test worker and was run again without it: the time covers both runs. */
  readonly stalledWithKeptWorker?: boolean;
}
const runRecordOf = (name: string) => join(REPORT_DIR, `${name}.run.json`);
const commitNow = () => spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();

function record(name: string, startedAt: Date, loadBefore: number, extra: object = {}, commit = commitNow()): void {
  const entry: RunRecord = {
    startedAt: startedAt.toISOString(),
    seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
    commit,
    loadBefore,
    loadAfter: loadavg()[0] as number,
  };
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(runRecordOf(name), `${JSON.stringify({ ...entry, ...extra }, null, 2)}\n`);
}

/**
 * Test runners per part unless --runners says otherwise. Every part's tests wait on time for much of a
 * mutant's run: real leases, waits and expiries (the redis part, on a real Redis), or the compressed
 * clock's 1 ms ticks and the watch and lock-set waits (domain, memory). With one runner per core the
 * cores sat idle for most of a part (load average about 0.5 through the memory part and the domain
 * part's last quarter, the watch mutants); more runners fill them. Measured from scratch: redis 12 min
 * 17 s with six at a load average of about 2, against 28 min 34 s with three.
 */
const PART_RUNNERS: Record<string, number> = { domain: 4, memory: 4, 'redis-codec': 4, redis: 6, etcd: 4 };

/**
 * No mutant finished for this long: the part has stalled. A mutant's run is bounded by the tests' own
 * time-out (15 s) or StrykerJS's (20 s plus 1.5 times its tests' time), so minutes without one mean a
 * runner that StrykerJS's time-out did not end. The kept test worker (keep-worker.ts) is the suspect:
 * the domain part stopped twice that way with it (never without it), and ran through since.
 */
const STALL_MS = 4 * 60_000;

/** One StrykerJS run of a part; resolves to its exit code, or 'stalled' when it was killed after STALL_MS without progress. */
function strykerOnce(part: string, options: readonly string[], keepWorker: boolean): Promise<number | 'stalled'> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [join(ROOT, 'node_modules/@stryker-mutator/core/bin/stryker.js'), 'run', ...options], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, STRYKER_PART: part, ...(keepWorker ? {} : { KEEP_WORKER: '0' }) },
      // Its own process group: a stalled run is ended with its runners and the redis-servers of their tests.
      detached: true,
    });
    // Interrupting this script ends the run's process group too (it is detached from ours).
    const stop = () => {
      process.kill(-(child.pid as number), 'SIGKILL');
      process.exit(130);
    };
    process.once('SIGINT', stop).once('SIGTERM', stop);
    let tested = -1;
    let progressAt = Date.now();
    let stalled = false;
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      // The progress reporter prints "… 123/780 tested …" every few seconds, moved on or not.
      for (const match of chunk.toString().matchAll(/(\d+)\/\d+ tested/g)) {
        const n = Number(match[1]);
        if (n !== tested) [tested, progressAt] = [n, Date.now()];
      }
    });
    const watchdog = setInterval(() => {
      if (Date.now() - progressAt < STALL_MS) return;
      stalled = true;
      clearInterval(watchdog);
      process.stderr.write(`\n*** stryker (part ${part}): no mutant finished for ${STALL_MS / 60_000} min; killing the run ***\n`);
      process.kill(-(child.pid as number), 'SIGKILL');
    }, 5_000);
    child.on('exit', (code) => {
      clearInterval(watchdog);
      process.off('SIGINT', stop).off('SIGTERM', stop);
      resolvePromise(stalled ? 'stalled' : (code ?? 1));
    });
  });
}

/**
 * Drops from a part's incremental file every file outside that part's scope (stryker.config.mjs PARTS).
 * StrykerJS keeps an old result whose file it no longer mutates ("old mutants that didn't run this time
 * around aren't forgotten") and writes it into the new report: after the Redis scope was split in two,
 * the `redis` part's report went on showing the reply, key and script files' results of the runs before
 * the split, never run again, while `redis-codec` (their part now) had no report at all.
 */
async function keepOwnFiles(part: string): Promise<void> {
  const path = join(REPORT_DIR, `stryker-incremental-${part}.json`);
  const incremental = readJson<{ files: Record<string, unknown> }>(path);
  if (incremental === null) return;
  const { PARTS } = (await import(join(ROOT, 'stryker.config.mjs'))) as { PARTS: Record<string, readonly string[]> };
  const patterns = PARTS[part] ?? [];
  const included = patterns.filter((p) => !p.startsWith('!'));
  const excluded = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1));
  const inScope = (file: string) => included.some((p) => matchesGlob(file, p)) && !excluded.some((p) => matchesGlob(file, p));
  const outside = Object.keys(incremental.files).filter((file) => !inScope(file));
  if (outside.length === 0) return;
  for (const file of outside) delete incremental.files[file];
  writeFileSync(path, JSON.stringify(incremental, null, 2));
  console.log(`stryker (part ${part}): left out of its incremental file, outside its scope: ${outside.join(', ')}`);
}

/**
 * Runs StrykerJS on each part in turn, recording each part's run. A part that stalls with the kept test
 * worker is run again from the start without it (slower, but StrykerJS's time-out then ends every
 * mutant); its record says so.
 */
async function runStryker(parts: readonly string[]): Promise<void> {
  for (const part of parts) {
    const runners = args.runners ?? String(PART_RUNNERS[part] ?? 2);
    const startedAt = new Date();
    const loadBefore = loadavg()[0] as number;
    // The commit StrykerJS copies into its sandbox now (the working tree may move on during a long run).
    const commit = commitNow();
    if (args.incremental) await keepOwnFiles(part);
    const options = ['--concurrency', runners, ...(args.incremental ? ['--incremental'] : [])];
    const keepWorker = process.env.KEEP_WORKER !== '0';
    let status = await strykerOnce(part, options, keepWorker);
    const stalledWithKeptWorker = status === 'stalled' && keepWorker;
    if (stalledWithKeptWorker) status = await strykerOnce(part, options, false);
    if (status !== 0) throw new Error(`stryker (part ${part}) ${status === 'stalled' ? 'stalled' : `exited ${status}`}`);
    const extra = { incremental: args.incremental, runners: Number(runners), ...(stalledWithKeptWorker ? { stalledWithKeptWorker } : {}) };
    record(`stryker-${part}`, startedAt, loadBefore, extra, commit);
  }
}

const minutes = (s: number) => `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;

function plantedTable(results: readonly PlantedResult[]): string {
  const rows = results.map(
    (r) =>
      `| ${r.mutant.id} | \`${r.mutant.file}\` | ${r.mutant.what} | **${r.status}** | ${r.killedBy.replace(/\|/g, '\\|')} | ${r.seconds} |`,
  );
  return ['| mutant | file | planted bug | result | first failing test | s |', '|---|---|---|---|---|---:|', ...rows].join('\n');
}

function strykerTable(s: StrykerSummary): string {
  const rows = s.files.map(
    (f) =>
      `| \`${f.file}\` | ${f.score.toFixed(1)} | ${f.killed} | ${f.timeout} | ${f.survived} | ${f.noCoverage} | ${f.ignored} | ${f.errors} |`,
  );
  return [
    '| file | score % | killed | timed out | survived | no coverage | ignored (static, string literals, marked equivalent) | compile/runtime errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    `| **all** | **${s.score.toFixed(1)}** | ${s.killed} | ${s.timeout} | ${s.survived} | ${s.noCoverage} | ${s.ignored} | ${s.errors} |`,
  ].join('\n');
}

interface PlantedRecord extends RunRecord {
  /** A safety test that failed without any mutant and passed when its file ran again alone. */
  readonly flakyWithoutMutant?: string | null;
  readonly planted: ReadonlyArray<{ id: string; file: string; what: string; status: string; killedBy: string; seconds: number }>;
  readonly focused: ReadonlyArray<{
    bug: string;
    mutant: string;
    testFile: string;
    testName: string;
    clean: string;
    mutated: string;
    seconds: number;
  }>;
}

const readJson = <T>(path: string): T | null => (existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as T) : null);
const describeRun = (r: RunRecord | null) =>
  r === null
    ? 'time not recorded'
    : `${minutes(r.seconds)}${r.incremental ? ' (incremental: unchanged mutants reused from the run before)' : ''}${r.runners ? `, ${r.runners} runners` : ''}${r.stalledWithKeptWorker ? ' (stalled with the kept test worker, then run again without it; the time covers both)' : ''} from ${r.startedAt.slice(0, 16)}Z, load average ${r.loadBefore.toFixed(1)} at the start and ${r.loadAfter.toFixed(1)} at the end, commit ${r.commit}`;

/** summary.md from the last StrykerJS report of each part and the last planted run, each with its own time, load and commit. */
function writeReport(): boolean {
  const reported = STRYKER_PARTS.filter((p) => existsSync(strykerReportOf(p)));
  const missing = STRYKER_PARTS.filter((p) => !reported.includes(p));
  const stryker = summariseStryker(reported.map(strykerReportOf), ROOT);
  const perPart = reported.map((p) => {
    const s = summariseStryker([strykerReportOf(p)], ROOT);
    return `| ${p} | ${s.score.toFixed(1)} | ${s.killed} | ${s.timeout} | ${s.survived} | ${s.noCoverage} | ${describeRun(readJson<RunRecord>(runRecordOf(`stryker-${p}`)))} |`;
  });
  const planted = readJson<PlantedRecord>(runRecordOf('planted'));
  const whole = readJson<RunRecord>(runRecordOf('whole'));
  const survivors = stryker.survivors.map(
    (m) => `- \`${m.file}:${m.line}\` ${m.mutator}: \`${m.replacement.replace(/\s+/g, ' ').slice(0, 100)}\``,
  );
  const plantedRows = (planted?.planted ?? []).map(
    (r) => `| ${r.id} | \`${r.file}\` | ${r.what} | **${r.status}** | ${r.killedBy.replace(/\|/g, '\\|')} | ${r.seconds} |`,
  );
  const focusedRows = (planted?.focused ?? []).map(
    (r: PlantedRecord['focused'][number] & { ranAt?: string }) =>
      `| ${r.bug} | ${r.mutant} | \`${r.testFile}\` > ${r.testName} | ${r.clean} | **${r.mutated}** | ${r.seconds}${r.ranAt ? ` (run again alone ${r.ranAt})` : ''} |`,
  );
  const report = [
    '# Mutation testing: last run',
    '',
    `Written ${new Date().toISOString()} on ${cpus().length} cores, Node ${process.version}. Each part below was run on its own, at the time, load and commit it names: the machine is shared, so every time is given with its load.`,
    missing.length > 0 ? `**Not measured: StrykerJS part(s) ${missing.join(', ')} have no report.**` : 'Every StrykerJS part has a report.',
    '',
    whole === null
      ? 'The whole of `npm run test:mutants` (every part from scratch, then the planted mutants and focused proofs) has no recorded run.'
      : `The whole of \`npm run test:mutants\` (every part from scratch, then the planted mutants and focused proofs), its last run: **${describeRun(whole)}** (budget: 30 min).`,
    '',
    '## StrykerJS: src/domain and src/store',
    '',
    `Mutation score **${stryker.score.toFixed(1)} %** over the parts reported (bar: ${MIN_STRYKER_SCORE} %). Score = (killed + timed out) / (killed + timed out + survived + no coverage); ` +
      'static mutants (module-level code), string literals and the mutants the code marks equivalent (`// Stryker disable next-line <mutator>: why`) are left out (see docs/testing.md). Full reports: `reports/mutation/stryker-<part>.html`.',
    '',
    '| part | score % | killed | timed out | survived | no coverage | run |',
    '|---|---:|---:|---:|---:|---:|---|',
    ...perPart,
    '',
    strykerTable(stryker),
    '',
    '### Surviving mutants',
    '',
    survivors.length === 0 ? 'None.' : survivors.join('\n'),
    '',
    '## Planted mutants',
    '',
    planted === null ? '**Not run.**' : `Run: ${describeRun(planted)}.`,
    planted?.flakyWithoutMutant
      ? `\n**Flaky without any mutant:** ${planted.flakyWithoutMutant} failed in the run of every safety test and passed when its file ran again alone.`
      : '',
    '',
    `Each planted alone in a copy of the repository and run against: ${SAFETY_TEST_FILES.map((f) => `\`${f}\``).join(', ')} (all part of \`npm test\`), up to the first failing test.`,
    '',
    '| mutant | file | planted bug | result | first failing test | s |',
    '|---|---|---|---|---|---:|',
    ...plantedRows,
    '',
    '## Focused proofs',
    '',
    'Each bug that `npm test` used to miss, planted alone, and the one test that must catch it run alone against it (`vitest run <file> -t <name>`), first on the unchanged code (it must pass), then with the mutant (it must fail).',
    '',
    '| bug | mutant | the test, run alone | without the mutant | with it | s |',
    '|---|---|---|---|---|---:|',
    ...focusedRows,
    '',
  ].join('\n');
  console.log(`\n${strykerTable(stryker)}\n`);
  console.log(`StrykerJS score ${stryker.score.toFixed(1)} % (bar ${MIN_STRYKER_SCORE} %)`);
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(join(REPORT_DIR, 'summary.md'), report);
  console.log('written: reports/mutation/summary.md');
  return stryker.score >= MIN_STRYKER_SCORE && missing.length === 0;
}

async function main(): Promise<void> {
  const wholeStartedAt = new Date();
  const wholeLoadBefore = loadavg()[0] as number;
  const wholeCommit = commitNow();
  if (args['report-only']) {
    if (!writeReport()) process.exitCode = 1;
    return;
  }
  const focusedOnly = args['focused-only'];
  const only = args.only?.split(',') ?? (focusedOnly ? FOCUSED_PROOFS.flatMap((p) => p.mutants) : undefined);
  const selected = only ? PLANTED_MUTANTS.filter((m) => only.includes(m.id)) : PLANTED_MUTANTS;
  const parts = args.parts?.split(',') ?? [...STRYKER_PARTS];
  if (!args['skip-stryker'] && !only) await runStryker(parts);
  if (args['stryker-only']) {
    if (!writeReport()) process.exitCode = 1;
    return;
  }

  const startedAt = new Date();
  const loadBefore = loadavg()[0] as number;
  let planted: PlantedResult[] = [];
  let focused: FocusedResult[] = [];
  let flaky: string | null = null;
  if (!focusedOnly) {
    // The safety tests without any mutant (a suite that fails on its own kills nothing); this run also
    // shows each focused proof's test passing on the unchanged code.
    const baselineDir = makeSandbox('baseline');
    const clean = new Map<string, string>();
    const baselineFailure = await runSafetyTests(baselineDir, (report) => {
      for (const file of report.testResults) for (const a of file.assertionResults) clean.set(a.fullName, a.status);
    });
    // A test that fails here and passes when its file is run again alone failed on the machine's load,
    // not on the code: the run goes on, and the report names it (a flaky test is a bug to fix).
    const retried = baselineFailure === null ? null : await runVitest(baselineDir, [baselineFailure.split(' ')[0] ?? '']);
    // A proof's test the run above did not reach (it stops at its first failure) is run alone here.
    for (const proof of args['skip-focused'] || retried !== null ? [] : FOCUSED_PROOFS) {
      if (clean.get(proof.testName) !== 'passed') clean.set(proof.testName, await runNamedTest(baselineDir, proof));
    }
    rmSync(baselineDir, { recursive: true, force: true });
    if (baselineFailure !== null && retried !== null) throw new Error(`the safety tests fail without any mutant: ${baselineFailure}`);
    if (baselineFailure !== null) {
      flaky = baselineFailure;
      console.error(`\n*** without any mutant, ${baselineFailure} failed once and passed when its file ran again alone ***\n`);
    }

    const kills = lastKills();
    const results = await runAll(selected, Number(args.concurrency), (m) => runPlanted(m, firstTestFiles(m, kills)));
    planted = results;
    if (!args['skip-focused']) {
      focused = results.flatMap((r) =>
        [...r.proofs].map(([proof, mutated]) => ({
          proof,
          mutant: r.mutant.id,
          clean: clean.get(proof.testName) ?? 'not run',
          mutated,
          seconds: r.seconds,
        })),
      );
    }
    console.log(`\n${plantedTable(planted)}\n`);
    const killed = planted.filter((p) => p.status === 'killed').length;
    console.log(`planted mutants killed ${killed}/${planted.length}`);
    const noMatch = planted.filter((p) => p.status === 'no-match').map((p) => p.mutant.id);
    if (noMatch.length > 0) {
      console.error(
        `\n*** the find of planted mutant(s) ${noMatch.join(', ')} no longer matches the code: re-anchor them in test/mutants/mutants.ts ***\n`,
      );
    }
    if (killed < planted.length) process.exitCode = 1;
  } else {
    const proofs = FOCUSED_PROOFS.flatMap((proof) =>
      proof.mutants.filter((m) => !only || only.includes(m)).map((m) => [proof, m] as const),
    );
    focused = await runAll(proofs, Number(args.concurrency), ([proof, m]) => runFocused(proof, m));
  }
  if (focused.length > 0) {
    console.log(`\n${focusedTable(focused)}\n`);
    console.log(`focused proofs ${focused.filter(proven).length}/${focused.length}`);
    if (!focused.every(proven)) process.exitCode = 1;
  }
  const last = readJson<PlantedRecord>(runRecordOf('planted'));
  if (focusedOnly && args['update-record'] && last !== null) {
    // Rows of the last planted run's record are replaced by these newer proofs (each row says when it ran).
    const fresh = focused.map((r) => ({ ...focusedRow(r), ranAt: `${new Date().toISOString().slice(0, 16)}Z, commit ${commitNow()}` }));
    const rows = last.focused.map((row) => fresh.find((f) => f.mutant === row.mutant) ?? row);
    writeFileSync(runRecordOf('planted'), `${JSON.stringify({ ...last, focused: rows }, null, 2)}\n`);
  }
  if (only) return;

  record('planted', startedAt, loadBefore, {
    planted: planted.map((r) => ({
      id: r.mutant.id,
      file: r.mutant.file,
      what: r.mutant.what,
      status: r.status,
      killedBy: r.killedBy,
      seconds: r.seconds,
    })),
    focused: focused.map(focusedRow),
    flakyWithoutMutant: flaky,
  });
  // The budget is for the whole of `npm run test:mutants`: recorded only when it ran everything, from scratch.
  const whole = !args['skip-stryker'] && !args.parts && !args['skip-focused'] && !args.incremental;
  if (whole) record('whole', wholeStartedAt, wholeLoadBefore, {}, wholeCommit);
  if (!writeReport()) process.exitCode = 1;
}

await main();
