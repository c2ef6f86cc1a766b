import { vi } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
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
 * A real keyholder server process on a free loopback port, for tests that kill, pause or restart it,
 * or that need several instances at once. Its log lines are collected in `logs`.
 */
export class KeyholderProcess {
  private child: ChildProcess | undefined;
  readonly logs: string[] = [];
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;

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

  async waitUntil(path: 'readyz' | 'livez', timeoutMs = 60_000): Promise<void> {
    const answered = await vi
      .waitFor(
        async () => {
          if (this.exitInfo) return false;
          const res = await fetch(`${this.url}/${path}`, { signal: AbortSignal.timeout(1_000) });
          if (res.status !== 200) throw new Error(`/${path} answered ${res.status}`);
          return true;
        },
        { timeout: timeoutMs, interval: 50 },
      )
      .catch(() => false);
    if (this.exitInfo) {
      throw new Error(`keyholder exited (${JSON.stringify(this.exitInfo)}) before /${path}:\n${this.logs.join('\n')}`);
    }
    if (!answered) throw new Error(`keyholder on ${this.port} never answered 200 on /${path}:\n${this.logs.join('\n')}`);
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
