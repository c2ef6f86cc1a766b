import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { KeyholderClient } from '../lib/keyholder.js';
import { startResultStore } from './result-store.js';

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
  /** Invocations that failed otherwise (keyholder unreachable, job error): must be 0. */
  readonly failed: number;
  /** What the failed invocations said. */
  readonly failures: readonly string[];
}

/** Checks `condition` every 20 ms until it holds; throws after `timeoutMs`. */
async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`cron example: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** True once the process is stopped (state T in /proc: Linux). */
function isStopped(pid: number): boolean {
  try {
    return / T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\)/, ''));
  } catch {
    return false;
  }
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
  let failed = 0;
  const failures: string[] = [];

  const invoke = (tick: number, server: string): Promise<void> => {
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
        if (code === 75) skipped++;
        // Woken after its lease ran out, `keyholder run` reports the loss (76, or 1 when it was still
        // confirming its first renewal): what the stall is meant to cause, not a failure.
        else if (code === 76 || (code !== 0 && frozenInvocations.has(`${tick} ${server}`))) lostLeases++;
        else if (code !== 0) {
          failed++;
          failures.push(`${server} tick ${tick}: exit ${code} ${stderr.trim()}`);
        }
        resolve();
      });
    });
  };

  /**
   * One stalled run: freeze its whole invocation until its lease has run out, let a late server run the
   * tick, then wake the job first (nothing makes the guardian run before it) and the rest after its write.
   */
  const stall = async (tick: number, resumedBefore: number): Promise<void> => {
    const pidsFile = join(stallDirOf(tick), 'pids');
    await until(() => existsSync(pidsFile), `tick ${tick}'s run to stall`);
    const [jobPid, guardianPid, server] = readFileSync(pidsFile, 'utf8').trim().split(' ') as [string, string, string];
    // Gone instead: its lease was lost before the freeze (renewals starved) and the guardian killed it.
    await until(() => isStopped(Number(jobPid)) || !existsSync(`/proc/${jobPid}`), `tick ${tick}'s job to stop`);
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
    await invoke(tick, 'server-late');
    process.kill(Number(jobPid), 'SIGCONT');
    await until(() => store.staleWrites() > resumedBefore, `tick ${tick}'s stalled write`);
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
                void invoke(tick, server).then(resolve);
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
      failed,
      failures,
    };
  } finally {
    await store.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
