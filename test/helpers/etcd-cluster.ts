import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { freePort } from './redis-server.js';

/**
 * The client ports of a running etcd cluster that test files run one after another in this process may
 * share (EtcdCluster.startShared), comma-separated, when something set one up (test/mutants/shared-etcd.ts,
 * for the mutation run's etcd part, where a cluster started per file and per mutant cost more than most
 * mutants' tests).
 */
export const SHARED_ETCD_PORTS_ENV = 'KEYHOLDER_TEST_SHARED_ETCD_PORTS';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function assertEtcdInstalled(): void {
  const probe = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      'etcd is not installed, and the tests need a real one. Install it with `sudo apt-get install -y etcd-server` (Debian/Ubuntu).',
    );
  }
}

interface Member {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  child: ChildProcess | undefined;
}

interface StatusReply {
  header?: { member_id?: string };
  leader?: string;
}

/**
 * A real etcd cluster of N members on loopback (free ports, a temporary data directory), owned by one
 * test file. Short heartbeat and election timeouts, so a lost leader is replaced within about a second.
 */
export class EtcdCluster {
  /** Started by someone else for files that share it (startShared): never stopped or killed here. */
  private shared = false;

  private constructor(
    readonly members: Member[],
    private readonly dir: string,
  ) {}

  /**
   * For a file that only talks to its cluster (never kills or restarts a member): the shared cluster when
   * one is set up (SHARED_ETCD_PORTS_ENV), emptied of every key as a new one would be, and a cluster of its
   * own otherwise. stop() then leaves the shared cluster running.
   */
  static async startShared(size = 3): Promise<EtcdCluster> {
    const ports = (process.env[SHARED_ETCD_PORTS_ENV] ?? '')
      .split(',')
      .filter((p) => p !== '')
      .map(Number);
    if (ports.length === 0) return EtcdCluster.start(size);
    const members = ports.map((clientPort, i) => ({ name: `m${i}`, clientPort, peerPort: 0, child: undefined }));
    const cluster = new EtcdCluster(members, '');
    cluster.shared = true;
    const client = new Etcd3({ hosts: cluster.endpoints });
    try {
      await client.delete().all();
    } finally {
      client.close();
    }
    return cluster;
  }

  static async start(size = 3): Promise<EtcdCluster> {
    assertEtcdInstalled();
    // Data on tmpfs where there is one: every etcd commit is an fsync, and on a disk shared with other
    // work that alone can take hundreds of ms. The tests are about consensus, not about the disk.
    const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'keyholder-etcd-'));
    const members: Member[] = [];
    for (let i = 0; i < size; i++)
      members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort(), child: undefined });
    const cluster = new EtcdCluster(members, dir);
    try {
      for (const m of members) cluster.launch(m);
      await cluster.waitForLeader(30_000);
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  get endpoints(): string[] {
    return this.members.map((m) => `http://127.0.0.1:${m.clientPort}`);
  }

  private launch(m: Member): void {
    const initialCluster = this.members.map((x) => `${x.name}=http://127.0.0.1:${x.peerPort}`).join(',');
    const args = [
      '--name',
      m.name,
      '--data-dir',
      join(this.dir, m.name),
      '--listen-client-urls',
      `http://127.0.0.1:${m.clientPort}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${m.clientPort}`,
      '--listen-peer-urls',
      `http://127.0.0.1:${m.peerPort}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${m.peerPort}`,
      '--initial-cluster',
      initialCluster,
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      'keyholder-test',
      '--heartbeat-interval',
      '50',
      '--election-timeout',
      '500',
      '--logger',
      'zap',
      '--log-level',
      'error',
    ];
    const child = spawn('etcd', args, { stdio: ['ignore', 'ignore', 'ignore'] });
    m.child = child;
    child.once('exit', () => {
      if (m.child === child) m.child = undefined;
    });
  }

  private async status(m: Member): Promise<StatusReply | null> {
    try {
      const res = await fetch(`http://127.0.0.1:${m.clientPort}/v3/maintenance/status`, {
        method: 'POST',
        body: '{}',
        signal: AbortSignal.timeout(1000),
      });
      return res.ok ? ((await res.json()) as StatusReply) : null;
    } catch {
      return null;
    }
  }

  /** The member that leads, as a quorum of running members agrees. */
  async leader(): Promise<Member | null> {
    const votes = new Map<string, number>();
    let running = 0;
    for (const m of this.members) {
      if (!m.child) continue;
      running++;
      const s = await this.status(m);
      if (s?.leader && s.leader !== '0') votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
    }
    for (const [id, n] of votes) {
      if (n * 2 <= running) continue;
      for (const m of this.members) {
        if (m.child && (await this.status(m))?.header?.member_id === id) return m;
      }
    }
    return null;
  }

  async waitForLeader(timeoutMs: number, other?: Member): Promise<Member> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const leader = await this.leader();
      if (leader && leader !== other) return leader;
      if (Date.now() > deadline) throw new Error('the etcd cluster has no leader');
      await sleep(50);
    }
  }

  /** kill -9 the leader; resolves with it (restart it with `restart`). */
  async killLeader(): Promise<Member> {
    const leader = await this.waitForLeader(10_000);
    await this.kill(leader);
    return leader;
  }

  async kill(m: Member): Promise<void> {
    if (this.shared) throw new Error('a shared etcd cluster is never killed by a test file: start one of its own (EtcdCluster.start)');
    const child = m.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /** Starts a killed member again on its data directory: it rejoins the cluster. */
  restart(m: Member): void {
    this.launch(m);
  }

  async stop(): Promise<void> {
    if (this.shared) return;
    await Promise.all(this.members.map((m) => this.kill(m)));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
