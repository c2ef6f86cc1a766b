import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Command, type Redis } from 'ioredis';
import type { HostPort, RedisConnection } from '../../src/store/redis/client.js';
import { until, withClient } from './redis-admin.js';
import { freePort, RedisServer } from './redis-server.js';

const run = promisify(execFile);

export interface RedisClusterOptions {
  readonly masters?: number;
  readonly replicasPerMaster?: number;
  /**
   * How long a master must be unreachable before it is failed over (cluster-node-timeout). 1 s on
   * loopback: a failover then takes about 2 s instead of the default 15 s.
   */
  readonly nodeTimeoutMs?: number;
}

/** `cluster info` as a map. */
async function clusterInfo(port: number): Promise<Map<string, string>> {
  const text = (await withClient(port, (c) => c.call('CLUSTER', 'INFO'))) as string;
  return new Map(
    text
      .split('\r\n')
      .filter((l) => l.includes(':'))
      .map((l) => l.split(':', 2) as [string, string]),
  );
}

/** One line of `cluster nodes`, the fields a test needs. */
interface NodeLine {
  readonly port: number;
  readonly master: boolean;
  readonly failed: boolean;
}

async function clusterNodes(port: number): Promise<NodeLine[]> {
  const text = (await withClient(port, (c) => c.call('CLUSTER', 'NODES'))) as string;
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [, address = '', flags = ''] = line.split(' ');
      return {
        port: Number(address.split('@')[0]?.split(':')[1]),
        master: flags.split(',').includes('master'),
        failed: /fail/.test(flags),
      };
    });
}

/**
 * A Redis Cluster on loopback: `masters` masters with `replicasPerMaster` replicas each (3 + 3 by
 * default), real `redis-server --cluster-enabled yes` processes on free ports with temporary data
 * directories, joined with `redis-cli --cluster create`. Owned by one test file; roles change on
 * failover, so servers are found by port.
 *
 * `cluster-require-full-coverage no`: while one master is down and not yet replaced, the other
 * masters keep serving their slots (their namespaces), as keyholder's docs recommend.
 */
export class RedisCluster {
  /** How long the last start took, ms (process start to every node reporting cluster_state:ok). */
  startupMs = 0;

  private constructor(readonly servers: RedisServer[]) {}

  static async start(options: RedisClusterOptions = {}): Promise<RedisCluster> {
    const began = performance.now();
    const masters = options.masters ?? 3;
    const count = masters * (1 + (options.replicasPerMaster ?? 1));
    const args = [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(options.nodeTimeoutMs ?? 1000),
      '--cluster-require-full-coverage',
      'no',
      // No diskless-sync delay: a replica syncs at once instead of after 5 s.
      '--repl-diskless-sync-delay',
      '0',
    ];
    // The cluster bus port is the client port + 10000 unless set: that lands in the ephemeral range,
    // where any outgoing connection may hold it, so each node gets a free test port for its bus too.
    const started = await Promise.allSettled(
      Array.from({ length: count }, async () => RedisServer.start({ args: [...args, '--cluster-port', String(await freePort())] })),
    );
    const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const cluster = new RedisCluster(servers);
    try {
      const failed = started.find((s) => s.status === 'rejected');
      if (failed) throw failed.reason;
      await run('redis-cli', [
        '--cluster',
        'create',
        ...servers.map((s) => `127.0.0.1:${s.port}`),
        '--cluster-replicas',
        String(options.replicasPerMaster ?? 1),
        '--cluster-yes',
      ]);
      await cluster.waitUntilHealthy(30_000);
      cluster.startupMs = Math.round(performance.now() - began);
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** The nodes keyholder is given (all of them; one would do). */
  get nodes(): HostPort[] {
    return this.servers.map((s) => ({ host: '127.0.0.1', port: s.port }));
  }

  get connection(): Extract<RedisConnection, { mode: 'cluster' }> {
    return { mode: 'cluster', nodes: this.nodes };
  }

  /** REDIS_CLUSTER_NODES for a keyholder process. */
  get nodesEnv(): string {
    return this.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  }

  server(port: number): RedisServer {
    const server = this.servers.find((s) => s.port === port);
    if (!server) throw new Error(`no server on port ${port}`);
    return server;
  }

  private running(): RedisServer[] {
    return this.servers.filter((s) => s.running);
  }

  /**
   * Every running node says cluster_state:ok and knows no failed node, and every running replica's
   * link to its master is up (so WAIT can count it).
   */
  async waitUntilHealthy(timeoutMs = 30_000): Promise<void> {
    for (const server of this.running()) {
      await until(`node ${server.port} to report cluster_state:ok`, timeoutMs, async () => {
        const info = await clusterInfo(server.port);
        if (info.get('cluster_state') !== 'ok') return undefined;
        const nodes = await clusterNodes(server.port);
        const runningPorts = new Set(this.running().map((s) => s.port));
        return nodes.some((n) => n.failed && runningPorts.has(n.port)) ? undefined : true;
      });
      await until(`node ${server.port}'s replication link`, timeoutMs, () =>
        withClient(server.port, async (c) => {
          const info = await c.info('replication');
          return /role:master/.test(info) || /master_link_status:up/.test(info) ? true : undefined;
        }),
      );
    }
  }

  /** The port of the master serving `key`'s slot, as the first running node that answers sees it. */
  async masterOf(key: string): Promise<number> {
    const slot = new Command('exists', [key]).getSlot();
    for (const server of this.running()) {
      try {
        const ranges = (await withClient(server.port, (c) => c.call('CLUSTER', 'SLOTS'))) as [number, number, [string, number]][];
        const range = ranges.find(([from, to]) => slot >= from && slot <= to);
        if (range) return range[2][1];
      } catch {
        // try the next node
      }
    }
    throw new Error(`no node knows who serves slot ${slot}`);
  }

  /** The ports of the running masters. */
  async masterPorts(): Promise<number[]> {
    const [first] = this.running();
    if (!first) return [];
    const running = new Set(this.running().map((s) => s.port));
    return (await clusterNodes(first.port)).filter((n) => n.master && !n.failed && running.has(n.port)).map((n) => n.port);
  }

  /** kill -9 the master serving `key`; resolves with its port. */
  async killMasterOf(key: string): Promise<number> {
    const port = await this.masterOf(key);
    await this.server(port).kill('SIGKILL');
    return port;
  }

  /** Resolves once a node other than `oldPort` serves `key`'s slot and takes writes there. */
  async waitForFailover(key: string, oldPort: number, timeoutMs = 30_000): Promise<number> {
    const port = await until('a replica to be promoted', timeoutMs, async () => {
      const p = await this.masterOf(key);
      return p !== oldPort ? p : undefined;
    });
    await until('the new master to take writes', timeoutMs, () =>
      withClient(port, async (c) => ((await c.set(`${key}:probe`, '1')) === 'OK' ? true : undefined)),
    );
    return port;
  }

  /**
   * A manual failover (CLUSTER FAILOVER on a replica of `key`'s master): the replica first catches up
   * with its master, then takes over; nothing acknowledged is lost. Resolves with the new master's port.
   */
  async manualFailover(key: string, timeoutMs = 30_000): Promise<{ from: number; to: number }> {
    const from = await this.masterOf(key);
    const masterId = (await withClient(from, (c) => c.call('CLUSTER', 'MYID'))) as string;
    const replica = await until('a replica of the master', timeoutMs, async () => {
      const text = (await withClient(from, (c) => c.call('CLUSTER', 'NODES'))) as string;
      const line = text.split('\n').find((l) => l.split(' ')[3] === masterId && !/fail/.test(l.split(' ')[2] ?? ''));
      return line ? Number(line.split(' ')[1]?.split('@')[0]?.split(':')[1]) : undefined;
    });
    await withClient(replica, (c) => c.call('CLUSTER', 'FAILOVER'));
    const to = await this.waitForFailover(key, from, timeoutMs);
    return { from, to };
  }

  /**
   * Moves `key`'s slot to another master while clients use it, as `redis-cli --cluster reshard` does
   * for each slot: IMPORTING on the target, MIGRATING on the source, MIGRATE the keys in batches (during
   * which clients get ASK and TRYAGAIN), then SETSLOT NODE on every master. Resolves with the ports.
   */
  async moveSlotOf(key: string): Promise<{ from: number; to: number; keys: number }> {
    const slot = new Command('exists', [key]).getSlot();
    const from = await this.masterOf(key);
    const to = (await this.masterPorts()).find((p) => p !== from);
    if (to === undefined) throw new Error('no other master to move the slot to');
    const id = (port: number) => withClient(port, async (c) => (await c.call('CLUSTER', 'MYID')) as string);
    const [fromId, toId] = [await id(from), await id(to)];
    await withClient(to, (c) => c.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId));
    await withClient(from, (c) => c.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId));
    let moved = 0;
    await withClient(from, async (c) => {
      for (;;) {
        const keys = (await c.call('CLUSTER', 'GETKEYSINSLOT', slot, 2)) as string[];
        if (keys.length === 0) return;
        // One batch at a time, so clients meet a half-moved slot (TRYAGAIN) for a while.
        await c.call('MIGRATE', '127.0.0.1', to, '', 0, 5000, 'KEYS', ...keys);
        moved += keys.length;
      }
    });
    for (const port of [to, from, ...(await this.masterPorts()).filter((p) => p !== from && p !== to)]) {
      await withClient(port, (c) => c.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId));
    }
    return { from, to, keys: moved };
  }

  /** Restarts a killed node on its port and data directory: it rejoins the cluster (as a replica). */
  async restart(port: number): Promise<void> {
    await this.server(port).launch();
  }

  /** Runs `use` with a plain client on every running master (FLUSHALL as an operator would, say). */
  async onEachMaster(use: (client: Redis) => Promise<unknown>): Promise<void> {
    for (const port of await this.masterPorts()) await withClient(port, use);
  }

  /** A plain client on the master serving `key`, for assertions. */
  async clientFor(key: string): Promise<Redis> {
    return this.server(await this.masterOf(key)).client();
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}
