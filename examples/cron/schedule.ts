import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

/** The `keyholder` command as npm installs it (`npm run build` writes dist/). */
const KEYHOLDER = fileURLToPath(new URL('../../dist/cli/keyholder.js', import.meta.url));
const JOB = fileURLToPath(new URL('./job.sh', import.meta.url));

/**
 * - `none`: every server runs the job at every tick (what plain cron on five servers does).
 * - `release`: through `keyholder run` on one fixed key, released when the job ends.
 * - `per-tick`: through `keyholder run` on a key naming the tick, kept until its TTL (`--keep`).
 */
export type CronMode = 'none' | 'release' | 'per-tick';

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
  /** `keyholder run` calls that found the lock held and did not run the job (exit 75). */
  readonly skipped: number;
  /** Invocations that failed otherwise (keyholder unreachable, job error): must be 0. */
  readonly failed: number;
  /** What the failed invocations said. */
  readonly failures: readonly string[];
}

/** Five "servers" start the same job each tick; counts how often it really ran per tick. */
export async function runSchedule(options: CronOptions): Promise<CronResult> {
  const dir = mkdtempSync(join(tmpdir(), 'keyholder-cron-'));
  const log = join(dir, 'runs.jsonl');
  writeFileSync(log, '');
  const job = randomBytes(4).toString('hex');
  let skipped = 0;
  let failed = 0;
  const failures: string[] = [];

  const invoke = (tick: number, server: string): Promise<void> => {
    const jobCommand = [JOB, log, String(tick), server, (options.workMs / 1000).toFixed(3)];
    const [command, args] =
      options.mode === 'none'
        ? [JOB, jobCommand.slice(1)]
        : [process.execPath, [
            KEYHOLDER,
            'run',
            '--key',
            options.mode === 'per-tick' ? `cron:report-${job}:tick-${tick}` : `cron:report-${job}`,
            // Renewed while the job runs. Per tick, kept: it must outlast the latest server's ask by far
            // (no other cost: the next tick has its own key); a minute covers a starved host's start-up.
            '--ttl-ms',
            String(options.mode === 'per-tick' ? Math.max(options.tickMs * 10, 60_000) : options.tickMs * 10),
            ...(options.mode === 'per-tick' ? ['--keep'] : []),
            '--holder',
            server,
            '--url',
            options.keyholderUrl,
            // A scheduler on a busy host is better late than skipped: nothing runs until keyholder answers.
            '--retry-ms',
            '30000',
            '--',
            ...jobCommand,
          ]];
    return new Promise((resolve) => {
      const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      child.once('exit', (code) => {
        if (code === 75) skipped++;
        else if (code !== 0) {
          failed++;
          failures.push(`${server} tick ${tick}: exit ${code} ${stderr.trim()}`);
        }
        resolve();
      });
    });
  };

  try {
    const start = Date.now() + 500;
    const all: Array<Promise<void>> = [];
    for (let tick = 0; tick < options.ticks; tick++) {
      const tickAt = start + tick * options.tickMs;
      for (let s = 1; s <= options.servers; s++) {
        const server = `server-${s}`;
        const at = tickAt + Math.random() * options.skewMs;
        all.push(new Promise<void>((resolve) => setTimeout(() => void invoke(tick, server).then(resolve), Math.max(0, at - Date.now()))));
      }
    }
    await Promise.all(all);

    const perTick = new Array<number>(options.ticks).fill(0);
    const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean);
    for (const line of lines) {
      const { tick } = JSON.parse(line) as { tick: number };
      perTick[tick] = (perTick[tick] ?? 0) + 1;
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
      skipped,
      failed,
      failures,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
