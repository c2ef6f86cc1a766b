import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface KeyholderProcessOptions {
  /** Extra environment; PORT and HOST are chosen here. */
  readonly env?: Record<string, string>;
  /** Run the compiled server (dist/server.js) instead of the TypeScript source through tsx. */
  readonly compiled?: boolean;
  /** Wait until /readyz answers 200 (default) or only until /livez does. */
  readonly waitFor?: 'readyz' | 'livez';
}

/**
 * 30 s: how long a start may take until /readyz (or /livez) answers 200, counted net of the time the
 * process's threads waited in a run queue for a CPU (WaitClock). A start is mostly CPU work (loading
 * and compiling the modules): measured through tsx on two cores, one instance at a time, it took
 * 2.5-4.6 s of wall time at load 5-10 and 38-52 s at load 20, but net of the waiting 0.5-0.7 s and
 * 4.5-5.9 s. A fixed wall-clock budget (60 s before) was overrun at load 12-24 by starts that were
 * only starved; 30 s net is five times the slowest start measured, and a start that hangs (a process
 * idle, waiting for something that does not come) was given up on after 30 s of wall time at load 9 and
 * 66 s at load 20 (with 20 s net): an idle process waits for no CPU, so its wait counts nearly in full.
 */
const START_BUDGET_NET_MS = 30_000;

/** The waiting for a CPU of all of a process's threads (ms), from Linux's /proc/<pid>/task/<tid>/schedstat; undefined elsewhere. */
function runQueueWaitMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    let waitMs = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const wait = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]);
      if (Number.isFinite(wait)) waitMs += wait / 1e6;
    }
    return waitMs;
  } catch {
    return undefined;
  }
}

/**
 * Wall time, less the time a process was kept from a CPU. Summed per step (each probe of the wait): a
 * step counts its wall time less the run-queue waiting of the process's threads in it, at least 0 (two
 * threads waiting at once count once: the step is not counted below nothing). The module loader runs on
 * a thread of its own, and the main thread sleeps while it waits for it: the main thread alone would
 * count that starvation as progress. Where there is no schedstat (not Linux), the plain wall time.
 */
class WaitClock {
  private readonly startedAt = performance.now();
  private lastAt = this.startedAt;
  private lastWaitMs: number | undefined;
  private netMs = 0;

  constructor(private readonly pid: number | undefined) {
    this.lastWaitMs = runQueueWaitMs(pid);
  }

  /** Brings the count up to now; returns the net time so far. */
  tick(): number {
    const now = performance.now();
    const waitMs = runQueueWaitMs(this.pid);
    const waitedMs = waitMs !== undefined && this.lastWaitMs !== undefined ? waitMs - this.lastWaitMs : 0;
    this.netMs += Math.max(0, now - this.lastAt - waitedMs);
    this.lastAt = now;
    if (waitMs !== undefined) this.lastWaitMs = waitMs;
    return this.netMs;
  }

  get wallMs(): number {
    return performance.now() - this.startedAt;
  }
}

/**
 * A real keyholder server process on a free loopback port, for tests that kill, pause or restart it,
 * or that need several instances at once. Its log lines are collected in `logs`.
 */
export class KeyholderProcess {
  private child: ChildProcess | undefined;
  readonly logs: string[] = [];
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** How long the last waitUntil took to its 200: wall time, and net of waiting for a CPU (see WaitClock). */
  started: { path: string; wallMs: number; netMs: number } | undefined;

  private constructor(
    readonly port: number,
    private readonly options: KeyholderProcessOptions,
  ) {}

  static async start(options: KeyholderProcessOptions = {}): Promise<KeyholderProcess> {
    const proc = new KeyholderProcess(await freePort(), options);
    await proc.launch();
    return proc;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get exit(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.exitInfo;
  }

  async launch(): Promise<void> {
    const args = this.options.compiled ? ['dist/server.js'] : ['--import', 'tsx', 'src/server.ts'];
    this.exitInfo = undefined;
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        // Load-shaped tests send thousands of requests from one address; tests of the limiter set their own.
        RATE_LIMIT_MAX: '0',
        // On a shared test machine other processes starve this one, and a starved process sees the same
        // event-loop delay as an overloaded one: it would refuse the tests' calls with 503 overloaded.
        // Tests of load shedding set their own budget.
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
        // Up to 2 s of CPU per start, times the hundreds of starts of the test files on a 2-core machine.
        // The tests of the warm-up, and those about a production-like start, set their own.
        WARM_UP_CYCLES: '0',
        ...this.options.env,
        PORT: String(this.port),
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    // Lines are written in batches, and a pipe may deliver a batch in pieces: a piece's last, unfinished
    // line waits for the rest (per stream), and is kept as it is if the process ends first.
    const collector = () => {
      let partial = '';
      const push = (line: string) => {
        if (line.trim()) this.logs.push(line);
      };
      return {
        data: (chunk: Buffer) => {
          const lines = (partial + chunk.toString('utf8')).split('\n');
          partial = lines.pop() ?? '';
          lines.forEach(push);
        },
        end: () => {
          push(partial);
          partial = '';
        },
      };
    };
    for (const stream of [child.stdout, child.stderr]) {
      const { data, end } = collector();
      stream?.on('data', data);
      stream?.on('end', end);
    }
    child.once('exit', (code, signal) => {
      this.exitInfo = { code, signal };
      if (this.child === child) this.child = undefined;
    });
    await this.waitUntil(this.options.waitFor ?? 'readyz');
  }

  /**
   * Waits until /`path` answers 200: up to `netBudgetMs` of the process's time net of waiting for a CPU
   * (START_BUDGET_NET_MS, WaitClock), so a start that is only starved on a loaded machine is waited for,
   * and one that hangs is not.
   */
  async waitUntil(path: 'readyz' | 'livez', netBudgetMs = START_BUDGET_NET_MS): Promise<void> {
    const clock = new WaitClock(this.pid);
    let last = 'no answer';
    while (!this.exitInfo) {
      const status = await fetch(`${this.url}/${path}`, { signal: AbortSignal.timeout(1_000) }).then(
        async (res) => {
          await res.arrayBuffer();
          return res.status;
        },
        (err: unknown) => (err instanceof Error ? err.name : String(err)),
      );
      const netMs = clock.tick();
      if (status === 200) {
        this.started = { path, wallMs: Math.round(clock.wallMs), netMs: Math.round(netMs) };
        return;
      }
      last = typeof status === 'number' ? `answered ${status}` : status;
      if (netMs > netBudgetMs) break;
      await sleep(50);
    }
    if (this.exitInfo) {
      throw new Error(`keyholder exited (${JSON.stringify(this.exitInfo)}) before /${path}:\n${this.logs.join('\n')}`);
    }
    throw new Error(
      `keyholder on ${this.port} never answered 200 on /${path} (last: ${last}) within ${netBudgetMs} ms net of waiting for a CPU ` +
        `(${Math.round(clock.tick())} ms net, ${Math.round(clock.wallMs)} ms wall):\n${this.logs.join('\n')}`,
    );
  }

  /** Sends a signal and waits for the process to exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGCONT');
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }

  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** Parsed JSON log lines (non-JSON lines are skipped). */
  jsonLogs(): Array<Record<string, unknown>> {
    return this.logs.flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  }
}

/** A tiny JSON client over fetch for tests that talk to a real server. */
export async function call(
  baseUrl: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
  timeoutMs = 5_000,
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = { raw: text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
