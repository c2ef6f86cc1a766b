import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/helpers/redis-server.js';

/**
 * The processes the benchmark starts and measures: keyholder, the bare-Fastify floor, the lock floor,
 * etcd and the live-mutex broker.
 */

export const ROOT = fileURLToPath(new URL('../', import.meta.url));

async function waitForHttp(url: string, isUp: (status: number) => boolean, what: string, exited: () => string | undefined): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const exit = exited();
    if (exit !== undefined) throw new Error(`${what} exited before it was ready: ${exit}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (isUp(res.status)) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not become ready at ${url}`);
}

/** A child process the benchmark owns; its output goes to a file (truncated between scenarios). */
export class OwnedProcess {
  private exitInfo: string | undefined;
  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly logFile: string,
    private readonly logFd: number,
  ) {
    child.once('exit', (code, signal) => {
      this.exitInfo = `code ${code}, signal ${signal}`;
    });
  }

  /** `cwd`: where the process runs (ROOT unless given: another build of keyholder, say). */
  static spawn(name: string, command: string, args: string[], env: Record<string, string>, dir: string, cwd = ROOT): OwnedProcess {
    const logFile = join(dir, `${name}.log`);
    // O_APPEND: the file can be truncated while the process keeps writing (production logs go to a
    // file or a pipe too; /dev/null would hide the cost of writing them).
    const logFd = openSync(logFile, 'a');
    const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', logFd, logFd] });
    return new OwnedProcess(name, child, logFile, logFd);
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} has no pid`);
    return this.child.pid;
  }

  get exited(): string | undefined {
    return this.exitInfo;
  }

  truncateLog(): void {
    truncateSync(this.logFile, 0);
  }

  tailLog(): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-20).join('\n');
    } catch {
      return '';
    }
  }

  async waitReady(url: string, isUp: (status: number) => boolean = (s) => s === 200): Promise<void> {
    try {
      await waitForHttp(url, isUp, this.name, () => this.exitInfo);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${this.tailLog()}`, { cause: err });
    }
  }

  /** Waits until something accepts TCP connections on `port` (a server that speaks no HTTP). */
  async waitTcp(port: number): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (this.exitInfo !== undefined) throw new Error(`${this.name} exited before it was ready: ${this.exitInfo}\n${this.tailLog()}`);
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port }, () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
      if (open) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${this.name} did not accept connections on port ${port}\n${this.tailLog()}`);
  }

  async stop(): Promise<void> {
    if (this.exitInfo === undefined) {
      const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    closeSync(this.logFd);
  }
}

export interface Keyholder {
  readonly proc: OwnedProcess;
  readonly url: string;
}

/**
 * keyholder as `npm start` runs it after `npm run build`: `node dist/server.js`, production mode,
 * REDIS_URL, LOG_LEVEL=info with the default ACCESS_LOG=sampled (request counts, one line in 100, every 5xx and
 * slow one), metrics on (always served at /metrics). BENCH_ENV='{"ACCESS_LOG":"full"}' measures a line per request.
 */
export async function startKeyholder(
  name: string,
  redisUrl: string,
  dir: string,
  extraEnv: Record<string, string> = {},
  nodeFlags: string[] = [],
  /** The checkout whose dist/server.js runs (built already): ROOT, or another build for an A/B. */
  root = ROOT,
): Promise<Keyholder> {
  const port = await freePort();
  const env = {
    NODE_ENV: 'production',
    REDIS_URL: redisUrl,
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: String(port),
    ...extraEnv,
  };
  const proc = OwnedProcess.spawn(name, process.execPath, [...nodeFlags, 'dist/server.js'], env, dir, root);
  const url = `http://127.0.0.1:${port}`;
  await proc.waitReady(`${url}/readyz`);
  return { proc, url };
}

/** The HTTP floor: a bare Fastify route in its own process. */
export async function startFloorHttp(dir: string): Promise<Keyholder> {
  const port = await freePort();
  const proc = OwnedProcess.spawn(
    'floor-http',
    process.execPath,
    ['--import', 'tsx', 'bench/floor-http-server.ts'],
    { NODE_ENV: 'production', PORT: String(port) },
    dir,
  );
  const url = `http://127.0.0.1:${port}`;
  await proc.waitReady(`${url}/ready`);
  return { proc, url };
}

/** The lock floor (floor-lock-server.ts): the naive lock service, in its own process, on the same Redis. */
export async function startFloorLock(dir: string, redisUrl: string): Promise<Keyholder> {
  const port = await freePort();
  const proc = OwnedProcess.spawn(
    'floor-lock',
    process.execPath,
    ['--import', 'tsx', 'bench/floor-lock-server.ts'],
    { NODE_ENV: 'production', PORT: String(port), REDIS_URL: redisUrl },
    dir,
  );
  const url = `http://127.0.0.1:${port}`;
  await proc.waitReady(`${url}/ready`);
  return { proc, url };
}

/** The live-mutex peer (live-mutex-broker.ts): its TCP broker, in its own process; `url` is tcp://host:port. */
export async function startLiveMutexBroker(dir: string): Promise<Keyholder> {
  const port = await freePort();
  const proc = OwnedProcess.spawn(
    'live-mutex',
    process.execPath,
    ['--import', 'tsx', 'bench/live-mutex-broker.ts'],
    { NODE_ENV: 'production', PORT: String(port) },
    dir,
  );
  await proc.waitTcp(port);
  return { proc, url: `tcp://127.0.0.1:${port}` };
}

export function etcdInstalled(): boolean {
  const probe = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  return !probe.error && probe.status === 0;
}

export function etcdVersion(): string {
  const probe = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  return /etcd Version:\s*(\S+)/.exec(probe.stdout ?? '')?.[1] ?? 'unknown';
}

/** A single-member etcd on loopback with its data in a temporary directory; its v3 JSON gateway is the peer. */
export async function startEtcd(dir: string): Promise<Keyholder> {
  const clientPort = await freePort();
  const peerPort = await freePort();
  const dataDir = join(dir, 'etcd-data');
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const proc = OwnedProcess.spawn(
    'etcd',
    'etcd',
    [
      '--name',
      'bench',
      '--data-dir',
      dataDir,
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `bench=${peer}`,
      '--logger',
      'zap',
      '--log-level',
      'error',
    ],
    {},
    dir,
  );
  await proc.waitReady(`${client}/health`);
  return { proc, url: client };
}

export function benchDir(): string {
  return mkdtempSync(join(tmpdir(), 'keyholder-bench-'));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
