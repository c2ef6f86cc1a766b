import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { RedisConnection } from '../../src/store/redis/client.js';
import { FaultProxy } from './fault-proxy.js';
import { until, withClient } from './redis-admin.js';
import { freePort, RedisServer } from './redis-server.js';

export interface SentinelTopologyOptions {
  readonly replicas?: number;
  readonly sentinels?: number;
  /** How long a primary must be silent before the sentinels call it down. */
  readonly downAfterMs?: number;
  /**
   * Replicate through a fault proxy (replica -> proxy -> primary), so a test can cut the replication
   * link while clients still reach the primary: the replica falls behind without anyone noticing.
   */
  readonly replicationProxy?: boolean;
}

/** Sentinels answer slowly while they agree on a topology: no point asking more often. */
const POLL_MS = 50;

/** One `redis-server --sentinel` process with its own config file (Sentinel rewrites it). */
class SentinelProcess {
  private child: ChildProcess | undefined;

  constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  launch(name: string, primaryPort: number, quorum: number, downAfterMs: number): void {
    const conf = join(this.dir, `sentinel-${this.port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primaryPort} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
        `sentinel failover-timeout ${name} 10000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
    this.child = spawn('redis-server', [conf, '--sentinel', '--loglevel', 'warning'], { stdio: ['ignore', 'ignore', 'ignore'] });
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}

/**
 * A Sentinel-managed Redis on loopback: one primary, its replicas and a quorum of sentinels, all real
 * processes on free ports, owned by one test file. Roles change on failover, so servers are found by port.
 */
export class SentinelTopology {
  static readonly NAME = 'keyholder';

  /** The replication links' proxies (with replicationProxy), one per replica. */
  readonly linkProxies: FaultProxy[] = [];

  private constructor(
    readonly servers: RedisServer[],
    readonly sentinels: SentinelProcess[],
    private readonly dir: string,
  ) {}

  static async start(options: SentinelTopologyOptions = {}): Promise<SentinelTopology> {
    const dir = mkdtempSync(join(tmpdir(), 'keyholder-sentinel-'));
    const servers: RedisServer[] = [];
    const sentinels: SentinelProcess[] = [];
    const topology = new SentinelTopology(servers, sentinels, dir);
    try {
      // No diskless-sync delay: the replica syncs at once instead of after 5 s.
      const primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
      servers.push(primary);
      for (let i = 0; i < (options.replicas ?? 1); i++) {
        let upstream = primary.port;
        if (options.replicationProxy) {
          const proxy = await FaultProxy.start(primary.port);
          topology.linkProxies.push(proxy);
          upstream = proxy.port;
        }
        servers.push(await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0', '--replicaof', '127.0.0.1', String(upstream)] }));
      }
      const count = options.sentinels ?? 3;
      const quorum = Math.floor(count / 2) + 1;
      for (let i = 0; i < count; i++) {
        const sentinel = new SentinelProcess(await freePort(), dir);
        sentinel.launch(SentinelTopology.NAME, primary.port, quorum, options.downAfterMs ?? 1000);
        sentinels.push(sentinel);
      }
      await topology.waitUntilSettled(primary.port, options.replicas ?? 1);
      return topology;
    } catch (err) {
      await topology.stop();
      throw err;
    }
  }

  /** The connection keyholder uses to reach this topology. */
  get connection(): Extract<RedisConnection, { mode: 'sentinel' }> {
    return { mode: 'sentinel', sentinels: this.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })), name: SentinelTopology.NAME };
  }

  /** REDIS_SENTINELS for a keyholder process. */
  get sentinelsEnv(): string {
    return this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',');
  }

  /** The primary's port as the first sentinel that answers reports it. */
  async primaryPort(): Promise<number> {
    for (const sentinel of this.sentinels) {
      try {
        const reply = await withClient(sentinel.port, (c) => c.call('SENTINEL', 'get-master-addr-by-name', SentinelTopology.NAME));
        if (Array.isArray(reply)) return Number(reply[1]);
      } catch {
        // try the next sentinel
      }
    }
    throw new Error('no sentinel answers');
  }

  server(port: number): RedisServer {
    const server = this.servers.find((s) => s.port === port);
    if (!server) throw new Error(`no server on port ${port}`);
    return server;
  }

  /** Every replica linked to the primary, and every sentinel aware of the replicas and of each other. */
  private async waitUntilSettled(primaryPort: number, replicas: number): Promise<void> {
    await until(
      'the replicas to sync',
      20_000,
      () =>
        withClient(primaryPort, async (c) => {
          const info = await c.info('replication');
          const online = info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
          return online >= replicas ? true : undefined;
        }),
      POLL_MS,
    );
    for (const sentinel of this.sentinels) {
      await until(
        `sentinel ${sentinel.port} to see the topology`,
        30_000,
        () =>
          withClient(sentinel.port, async (c) => {
            const seenReplicas = (await c.call('SENTINEL', 'replicas', SentinelTopology.NAME)) as unknown[];
            const seenSentinels = (await c.call('SENTINEL', 'sentinels', SentinelTopology.NAME)) as unknown[];
            return seenReplicas.length >= replicas && seenSentinels.length >= this.sentinels.length - 1 ? true : undefined;
          }),
        POLL_MS,
      );
    }
  }

  /**
   * SENTINEL FAILOVER of `name` through the sentinel on `port`, asked again while the sentinel answers
   * NOGOODSLAVE: it picks only a replica whose INFO and pings it has seen lately, which a starved host can
   * delay past the replica's sync. That answer changed nothing, so asking again is safe.
   */
  static async failover(port: number, name: string, timeoutMs = 30_000): Promise<void> {
    // until() asks again after an error, and names the last one if the time runs out.
    await until(
      `sentinel to accept the failover of ${name}`,
      timeoutMs,
      () => withClient(port, async (c) => ((await c.call('SENTINEL', 'FAILOVER', name)) === 'OK' ? true : undefined)),
      POLL_MS,
    );
  }

  /** kill -9 the current primary; resolves with its port. */
  async killPrimary(): Promise<number> {
    const port = await this.primaryPort();
    await this.server(port).kill('SIGKILL');
    return port;
  }

  /** Resolves once the sentinels name a primary other than `oldPort` and it accepts writes. */
  async waitForNewPrimary(oldPort: number, timeoutMs = 30_000): Promise<number> {
    const port = await until(
      'a failover',
      timeoutMs,
      async () => {
        const p = await this.primaryPort();
        return p !== oldPort ? p : undefined;
      },
      POLL_MS,
    );
    await until(
      'the new primary to take writes',
      timeoutMs,
      () => withClient(port, async (c) => ((await c.set('keyholder-test:probe', '1')) === 'OK' ? true : undefined)),
      POLL_MS,
    );
    return port;
  }

  /** Restarts a killed server as a replica of the current primary, as a supervisor bringing it back would. */
  async rejoin(port: number): Promise<void> {
    const primary = await this.primaryPort();
    await this.server(port).launch(['--replicaof', '127.0.0.1', String(primary)]);
  }

  /** A plain client on the current primary, for assertions and for simulating operators. */
  async primaryClient(): Promise<Redis> {
    return this.server(await this.primaryPort()).client();
  }

  async stop(): Promise<void> {
    await Promise.all(this.sentinels.map((s) => s.kill()));
    await Promise.all(this.linkProxies.map((p) => p.close()));
    await Promise.all(this.servers.map((s) => s.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
