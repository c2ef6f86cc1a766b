import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * Ports for the servers tests start: below Linux's ephemeral range (32768-60999), so an outgoing
 * connection can never be handed a port a test is about to listen on, and chosen at random so that
 * parallel test files rarely pick the same one.
 */
const TEST_PORTS = { from: 20_000, to: 32_000 } as const;
/** Ports this process handed out: never handed out twice (a server stopped for a restart keeps its port). */
const handedOut = new Set<number>();

/** Whether nothing listens on `port` on loopback now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A TCP port on loopback that nothing listens on, for a server a test starts. Not the OS's listen(0)
 * pick: that comes from the ephemeral range, where a port just released is soon handed to someone
 * else (another test file's server, or any outgoing connection) before the test's server binds it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = TEST_PORTS.from + Math.floor(Math.random() * (TEST_PORTS.to - TEST_PORTS.from));
    if (handedOut.has(port)) continue;
    if (await canListen(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port between ${TEST_PORTS.from} and ${TEST_PORTS.to}`);
}

/** The port a server was to listen on turned out to be another's. */
class PortTakenError extends Error {}

function assertRedisInstalled(): void {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      'redis-server is not installed, and the tests need a real one. Install it with ' +
        '`sudo apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS).',
    );
  }
}

export interface RedisServerOptions {
  /** Keep an append-only file, so a restart keeps the data (as a production Redis should). */
  readonly appendOnly?: boolean;
  /** More redis-server arguments (a replica's --replicaof, cluster mode, ...). */
  readonly args?: readonly string[];
}

/**
 * The port of a redis-server that test files running one after another in this process may share
 * (RedisServer.startShared), when something set one up (test/mutants/shared-redis.ts, for the mutation
 * run's Redis part, where starting a server per file and per mutant cost more than most mutants' tests).
 */
export const SHARED_REDIS_PORT_ENV = 'KEYHOLDER_TEST_SHARED_REDIS_PORT';

/**
 * A real redis-server process on a free loopback port, owned by one test file. Never touches the
 * machine's Redis on 6379. Can be killed and restarted on the same port and data directory.
 */
export class RedisServer {
  private child: ChildProcess | undefined;
  readonly dir: string;
  /** Started by someone else for files that share it (startShared): never stopped, paused or killed here. */
  private shared = false;

  private constructor(
    readonly port: number,
    private readonly options: RedisServerOptions,
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'keyholder-redis-'));
  }

  static async start(options: RedisServerOptions = {}, port?: number): Promise<RedisServer> {
    assertRedisInstalled();
    const server = new RedisServer(port ?? (await freePort()), options);
    await server.launch();
    return server;
  }

  /**
   * For a file that only talks to its server (never kills, pauses or restarts it): the shared server
   * when one is set up (SHARED_REDIS_PORT_ENV), emptied as a new one would be (data, scripts, command
   * statistics), and its own server otherwise. stop() then leaves the shared server running.
   */
  static async startShared(): Promise<RedisServer> {
    const port = Number(process.env[SHARED_REDIS_PORT_ENV] ?? '');
    if (!Number.isInteger(port) || port <= 0) return RedisServer.start();
    const server = new RedisServer(port, {});
    rmSync(server.dir, { recursive: true, force: true });
    server.shared = true;
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    try {
      await client.flushall();
      await client.script('FLUSH');
      await client.config('RESETSTAT');
    } finally {
      client.disconnect();
    }
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.shared || this.child !== undefined;
  }

  private assertOwned(what: string): void {
    if (this.shared) throw new Error(`a shared redis-server cannot be ${what} by one test file: use RedisServer.start()`);
  }

  /** Starts the process (again); `extraArgs` apply to this start only (a replica rejoining, say). */
  async launch(extraArgs: readonly string[] = []): Promise<void> {
    this.assertOwned('started again');
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--appendonly',
      this.options.appendOnly ? 'yes' : 'no',
      '--appendfsync',
      'always',
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
      ...(this.options.args ?? []),
      ...extraArgs,
    ];
    const child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    try {
      await this.waitUntilReady();
    } catch (err) {
      // Not left running: a server that never answered is no one's to stop.
      child.kill('SIGKILL');
      throw err;
    }
  }

  /** Polls with a fresh client until Redis answers PING (a loop, not vi.waitFor: bench/ runs this outside vitest). */
  private async waitUntilReady(): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      client.on('error', () => undefined);
      try {
        await client.connect();
        // With an append-only file, Redis answers LOADING until the data is back.
        if ((await client.ping()) === 'PONG') {
          // Another test's server on this port would answer too: make sure it is ours.
          const pid = /process_id:(\d+)/.exec(await client.info('server'))?.[1];
          if (this.child && pid !== String(this.child.pid)) {
            throw new PortTakenError(`port ${this.port} is served by another redis-server (pid ${pid})`);
          }
          return;
        }
      } catch (err) {
        if (err instanceof PortTakenError) throw err;
        if (Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not start`, { cause: err });
        await sleep(25);
      } finally {
        client.disconnect();
      }
    }
  }

  /** Kills the process (SIGKILL by default: no chance to save anything). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.assertOwned('killed');
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.launch();
  }

  /** SIGSTOP / SIGCONT: a Redis that holds connections open but answers nothing. */
  pause(): void {
    this.assertOwned('paused');
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** A plain client for assertions and for simulating operators (FLUSHALL, DEL). */
  client(): Redis {
    const client = new Redis(this.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    return client;
  }

  async stop(): Promise<void> {
    if (this.shared) return;
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
