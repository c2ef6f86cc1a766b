import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { KeyholderClient } from '../lib/keyholder.js';
import { startResultStore } from './result-store.js';
import { ERROR_CODES } from '../../src/domain/error-codes.js';

/** The `keyholder` command as npm installs it (`npm run build` writes dist/). */
const KEYHOLDER = fileURLToPath(new URL('../../dist/cli/keyholder.js', import.meta.url));
const JOB = fileURLToPath(new URL('./job.sh', import.meta.url));

/**
 * - `none`: every server runs the job at every tick (what plain cron on five servers does).
 * - `lock`: through `keyholder run` on a key naming the tick, kept until its TTL (`--keep`); the result
 *   store takes any write.
 * - `fenced`: the same, and the result store refuses a write whose fencing token is lower than the
 *   tick's last written one.
 */
export type CronMode = 'none' | 'lock' | 'fenced';

export interface CronOptions {
  readonly mode: CronMode;
  readonly keyholderUrl: string;
  readonly servers: number;
  readonly ticks: number;
  readonly tickMs: number;
  /** Each server starts each tick up to this late (clock skew, load): uniform random. */
  readonly skewMs: number;
  /** How long the job runs. */
  readonly workMs: number;
  /** The per-tick lease's TTL. */
  readonly ttlMs: number;
  /**
   * Ticks 1..stalls each get one run that freezes (job, `keyholder run` and its guardian stopped, as a
   * paused VM is) until its lease has run out and a late server has run the tick again; then the job
   * resumes first and writes its result.
   */
  readonly stalls: number;
}

export interface CronResult {
  readonly mode: CronMode;
  readonly servers: number;
  readonly ticks: number;
  readonly runs: number;
  readonly ticksExactlyOnce: number;
  readonly ticksMissed: number;
  readonly ticksRunTwiceOrMore: number;
  readonly maxRunsInATick: number;
  readonly stalledRuns: number;
  /** Ticks whose stored result is a stalled run's, written over the late run's newer result. */
  readonly staleResultsApplied: number;
  /** Stalled runs' result writes the fence refused. */
  readonly staleResultsRefused: number;
  /** `keyholder run` calls that found the lock held and did not run the job (exit 75). */
  readonly skipped: number;
  /** `keyholder run` calls that found their lease lost when they woke (exit 76). */
  readonly lostLeases: number;
  /**
   * `keyholder run` calls that ran nothing because no grant reached them in time: no answer within their
   * retries (exit 1, "could not take lock"), or a grant that arrived after the lease's safe deadline (exit
   * 76, "lost before the command started"). What a starved host does; the job did not start.
   */
  readonly lostBeforeStart: number;
  /** Invocations that failed otherwise (job error, keyholder run crashed): must be 0. */
  readonly failed: number;
  /** What the failed invocations said. */
  readonly failures: readonly string[];
}

/**
 * Checks `condition` every 20 ms until it holds. No time limit of its own: how long a starved machine takes
 * is not known in advance (the caller's timeout, if any, is the backstop). It throws only once `alive`
 * says nothing is left that could make the condition hold.
 */
async function until(condition: () => boolean | Promise<boolean>, what: string, alive: () => boolean = () => true): Promise<void> {
  while (!(await condition())) {
    if (!alive() && !(await condition())) throw new Error(`cron example: ${what}: what could do it has ended`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The process's state letter in /proc (Linux), or undefined once it is gone. */
function stateOf(pid: number): string | undefined {
  try {
    return / (\S) /.exec(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\)/, ''))?.[1];
  } catch {
    return undefined;
  }
}

/** True once the process is stopped (state T). */
const isStopped = (pid: number): boolean => stateOf(pid) === 'T';

/** True while the process exists and has not exited (a zombie, state Z, has). */
const isAlive = (pid: number): boolean => ![undefined, 'Z', 'X'].includes(stateOf(pid));

/**
 * Whether `keyholder run` gave up because no grant reached it within its retries: it says "could not take
 * lock" with a code the client retries (the network, 503, 429, 408; ERROR_CODES' `retryable`). Any other
 * code (a refused key, a bad request) is a failure of the example, not what a starved host does.
 */
export function gaveUpRetrying(stderr: string): boolean {
  const code = /keyholder run: could not take lock "[^"]*": (\w+):/.exec(stderr)?.[1];
  if (code === undefined) return false;
  if (code === 'unreachable') return true;
  const row = (ERROR_CODES as Record<string, { readonly retryable: boolean }>)[code];
  return row?.retryable === true;
}

/** The servers start the same job each tick; counts how often it really ran per tick and what it wrote. */
export async function runSchedule(options: CronOptions): Promise<CronResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyholder-cron-'));
  const log = join(dir, 'runs.jsonl');
  writeFileSync(log, '');
  const store = await startResultStore(options.mode === 'fenced');
  const keyholder = new KeyholderClient(options.keyholderUrl);
  const job = randomBytes(4).toString('hex');
  const keyOf = (tick: number) => `cron:report-${job}:tick-${tick}`;
  const stallDirOf = (tick: number) => (tick >= 1 && tick <= options.stalls ? join(dir, `stall-${tick}`) : '');
  /** `keyholder run` process per tick and server, to freeze the stalled run's. */
  const invocations = new Map<string, number>();
  /** Invocations still running, per tick. */
  const running = new Array<number>(options.ticks).fill(0);
  /** The invocations frozen by a stall: whatever they exit with after waking, their lease was lost. */
  const frozenInvocations = new Set<string>();
  let skipped = 0;
  let lostLeases = 0;
  let lostBeforeStart = 0;
  let failed = 0;
  const failures: string[] = [];
  /** Invocations started by a stall (the late server, restarts), awaited with the scheduled ones. */
  const extra: Array<Promise<void>> = [];
  /** Whether the job of this tick and server started: job.sh's line in the run log. */
  const jobStarted = (tick: number, server: string): boolean => readFileSync(log, 'utf8').includes(`{"tick":${tick},"server":"${server}",`);

  /** Runs one server's invocation of the tick; true when it was lost before start (ran nothing). */
  const invoke = (tick: number, server: string): Promise<boolean> => {
    const jobCommand = [JOB, log, String(tick), server, (options.workMs / 1000).toFixed(3), store.url, stallDirOf(tick)];
    const [command, args] =
      options.mode === 'none'
        ? [JOB, jobCommand.slice(1)]
        : [
            process.execPath,
            [
              KEYHOLDER,
              'run',
              '--key',
              keyOf(tick),
              // Kept, not released: a server that asks late in the tick finds it taken.
              '--ttl-ms',
              String(options.ttlMs),
              '--keep',
              '--kill-grace-ms',
              String(Math.floor(options.ttlMs / 4)),
              '--holder',
              server,
              '--url',
              options.keyholderUrl,
              // A scheduler on a busy host is better late than skipped: nothing runs until keyholder answers.
              '--retry-ms',
              '30000',
              '--',
              ...jobCommand,
            ],
          ];
    return new Promise((resolve) => {
      const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      if (child.pid !== undefined) invocations.set(`${tick} ${server}`, child.pid);
      running[tick]!++;
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      child.once('exit', (code) => {
        running[tick]!--;
        const lostBeforeItStarted =
          options.mode !== 'none' && (code === 76 || (code === 1 && gaveUpRetrying(stderr))) && !jobStarted(tick, server);
        if (code === 75) skipped++;
        else if (lostBeforeItStarted) lostBeforeStart++;
        // Woken after its lease ran out, `keyholder run` reports the loss (76, or 1 when it was still
        // confirming its first renewal): what the stall is meant to cause, not a failure.
        else if (code === 76 || (code !== 0 && frozenInvocations.has(`${tick} ${server}`))) lostLeases++;
        else if (code !== 0) {
          failed++;
          failures.push(`${server} tick ${tick}: exit ${code} ${stderr.trim()}`);
        }
        resolve(lostBeforeItStarted);
      });
    });
  };

  /**
   * One stalled run: freeze its whole invocation until its lease has run out, let a late server run the
   * tick, then wake the job first (nothing makes the guardian run before it) and the rest after its write.
   */
  const stall = async (tick: number, resumedBefore: number): Promise<void> => {
    const pidsFile = join(stallDirOf(tick), 'pids');
    // The first run of the tick to start is the one that freezes. On a starved machine every invocation
    // of the tick may end having run nothing (lost before start: no answer in time, or a grant past its
    // safe deadline): the tick is then started again on one more server, until a run starts (a grant
    // kept by a late invocation makes these find the lock held until its TTL runs out).
    for (let restart = 1; ; restart++) {
      await until(() => existsSync(pidsFile) || running[tick] === 0, `tick ${tick}'s invocations`);
      if (existsSync(pidsFile)) break;
      extra.push(invoke(tick, `server-restart-${restart}`).then(() => undefined));
    }
    const [jobPid, guardianPid, server] = readFileSync(pidsFile, 'utf8').trim().split(' ') as [string, string, string];
    // Gone instead: its lease was lost before the freeze (renewals starved) and the guardian killed it.
    await until(() => isStopped(Number(jobPid)) || !isAlive(Number(jobPid)), `tick ${tick}'s job to stop`);
    if (!isStopped(Number(jobPid))) return;
    // Without a lock the job's parent is this process: only the job freezes.
    const frozen = options.mode === 'none' ? [] : [Number(guardianPid), invocations.get(`${tick} ${server}`)!];
    if (options.mode !== 'none') frozenInvocations.add(`${tick} ${server}`);
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    if (options.mode !== 'none') {
      let last = '';
      await until(
        async () => {
          const status = await keyholder.inspect(keyOf(tick));
          last = JSON.stringify(status);
          return status.ok && !status.value.held;
        },
        `tick ${tick}'s lease to run out (frozen: ${server}, ${frozen.join(', ')}; last seen: ${last})`,
      );
    }
    // The tick's other servers are done, so the late run's result is the newest written before the wake.
    await until(() => running[tick] === 1, `tick ${tick}'s other servers`);
    // The late run is the tick's second: started again (another late server) while it is lost before start.
    for (let late = 1; await invoke(tick, late === 1 ? 'server-late' : `server-late-${late}`); late++);
    process.kill(Number(jobPid), 'SIGCONT');
    await until(
      () => store.staleWrites() > resumedBefore,
      `tick ${tick}'s stalled write`,
      () => isAlive(Number(jobPid)),
    );
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
  };

  try {
    const start = Date.now() + 500;
    const all: Array<Promise<void>> = [];
    for (let tick = 0; tick < options.ticks; tick++) {
      const tickAt = start + tick * options.tickMs;
      for (let s = 1; s <= options.servers; s++) {
        const server = `server-${s}`;
        const at = tickAt + Math.random() * options.skewMs;
        // Counted as running from the tick on, so a stall waits for servers that have yet to start.
        running[tick]!++;
        all.push(
          new Promise<void>((resolve) =>
            setTimeout(
              () => {
                running[tick]!--;
                void invoke(tick, server).then(() => resolve());
              },
              Math.max(0, at - Date.now()),
            ),
          ),
        );
      }
    }
    // One stall at a time, so that each resumed job's write is told apart.
    all.push(
      (async () => {
        for (let tick = 1; tick <= options.stalls && tick < options.ticks; tick++) await stall(tick, tick - 1);
      })(),
    );
    await Promise.all(all);
    await Promise.all(extra);

    const perTick = new Array<number>(options.ticks).fill(0);
    const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean);
    let stalledRuns = 0;
    for (const line of lines) {
      const { tick, stalled } = JSON.parse(line) as { tick: number; stalled: boolean };
      perTick[tick] = (perTick[tick] ?? 0) + 1;
      if (stalled) stalledRuns++;
    }
    return {
      mode: options.mode,
      servers: options.servers,
      ticks: options.ticks,
      runs: lines.length,
      ticksExactlyOnce: perTick.filter((n) => n === 1).length,
      ticksMissed: perTick.filter((n) => n === 0).length,
      ticksRunTwiceOrMore: perTick.filter((n) => n > 1).length,
      maxRunsInATick: Math.max(...perTick),
      stalledRuns,
      staleResultsApplied: store.staleResultsApplied(),
      staleResultsRefused: store.staleResultsRefused(),
      skipped,
      lostLeases,
      lostBeforeStart,
      failed,
      failures,
    };
  } finally {
    await store.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
