import type { LoopResult, LoopTask } from './protocol.js';
import { startKeyholder, type Keyholder, type OwnedProcess } from './procs.js';
import { EtcdCluster } from '../test/helpers/etcd-cluster.js';
import { RedisCluster } from '../test/helpers/redis-cluster.js';
import { SentinelTopology } from '../test/helpers/redis-sentinel.js';

/**
 * Each replicated backend beside one Redis, in the same run and with the same load: lock pairs
 * (acquire + release on fresh keys) and hand-offs on one hot key, through the built server with
 * production settings. The topologies are the tests' (loopback, real processes): Sentinel with one
 * replica, with and without a replica acknowledgement per grant, a Redis Cluster of 3 masters + 3
 * replicas (with and without acks), and a 3-member etcd cluster. The load is one namespace, so on the
 * Cluster it lands on one master: the figures are the cost per namespace, not the Cluster's total.
 */
export interface BackendRow {
  readonly backend: string;
  readonly pairs: LoopResult[];
  readonly hot: LoopResult[];
}

export interface BackendRun {
  readonly rows: BackendRow[];
  stop(): Promise<void>;
}

type RunLoop = (task: LoopTask) => Promise<LoopResult>;

export async function measureBackends(options: {
  readonly oneRedis: Keyholder;
  readonly dir: string;
  readonly access: Record<string, string>;
  readonly rounds: number;
  readonly warmMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
  readonly runLoop: RunLoop;
  readonly progress: (line: string) => void;
}): Promise<BackendRow[]> {
  const owned: OwnedProcess[] = [];
  let sentinel: SentinelTopology | undefined;
  let etcd: EtcdCluster | undefined;
  let cluster: RedisCluster | undefined;
  try {
    options.progress('backends: starting a Sentinel topology, a Redis Cluster and a 3-member etcd cluster');
    sentinel = await SentinelTopology.start({ replicas: 1, sentinels: 3 });
    cluster = await RedisCluster.start();
    etcd = await EtcdCluster.start(3);
    // REDIS_URL '' counts as unset: these instances reach their store another way. Each replicated
    // Redis runs twice, without and with a replica acknowledgement per grant, on its own key prefix.
    const withAndWithoutAcks = async (name: string, prefix: string, env: Record<string, string>) => {
      const noAcks = await startKeyholder(`kh-${name}`, '', options.dir, { ...options.access, ...env, REDIS_KEY_PREFIX: `${prefix}0:` });
      owned.push(noAcks.proc);
      const acks = await startKeyholder(`kh-${name}-acks`, '', options.dir, {
        ...options.access,
        ...env,
        REDIS_KEY_PREFIX: `${prefix}1:`,
        REDIS_MIN_REPLICA_ACKS: '1',
        REDIS_REPLICA_ACK_TIMEOUT_MS: '100',
      });
      owned.push(acks.proc);
      return [noAcks, acks] as const;
    };
    const [sentinelNoAcks, sentinelAcks] = await withAndWithoutAcks('sentinel', 'bs', {
      REDIS_SENTINELS: sentinel.sentinelsEnv,
      REDIS_SENTINEL_NAME: SentinelTopology.NAME,
    });
    const [clusterNoAcks, clusterAcks] = await withAndWithoutAcks('cluster', 'bc', { REDIS_CLUSTER_NODES: cluster.nodesEnv });
    const onEtcd = await startKeyholder('kh-etcd', '', options.dir, {
      ...options.access,
      KEYHOLDER_STORE: 'etcd',
      ETCD_ENDPOINTS: etcd.endpoints.join(','),
    });
    owned.push(onEtcd.proc);

    const backends: Array<[string, Keyholder]> = [
      ['one Redis (AOF)', options.oneRedis],
      ['Sentinel, no acks', sentinelNoAcks],
      ['Sentinel + 1 replica ack', sentinelAcks],
      ['Redis Cluster 3+3, no acks', clusterNoAcks],
      ['Redis Cluster 3+3 + 1 replica ack', clusterAcks],
      ['etcd, 3 members', onEtcd],
    ];
    const rows: BackendRow[] = backends.map(([backend]) => ({ backend, pairs: [], hot: [] }));
    for (let round = 1; round <= options.rounds; round++) {
      for (const [i, [name, kh]] of backends.entries()) {
        for (const scenario of ['pairs', 'hot'] as const) {
          options.progress(`backends round ${round}/${options.rounds}: ${name} ${scenario}`);
          const result = await options.runLoop({
            kind: 'loop',
            scenario,
            target: kh.url,
            concurrency: options.concurrency,
            warmMs: options.warmMs,
            durationMs: options.durationMs,
            tag: `backend-${i}-${round}-${Date.now()}`,
            serverPid: kh.proc.pid,
          });
          kh.proc.truncateLog();
          (rows[i] as BackendRow)[scenario].push(result);
        }
      }
    }
    return rows;
  } finally {
    for (const proc of owned.reverse()) await proc.stop().catch(() => undefined);
    await sentinel?.stop().catch(() => undefined);
    await cluster?.stop().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
  }
}

const median = (values: number[]) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : (sorted[Math.floor((sorted.length - 1) / 2)] as number);
};
const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** The comparison as Markdown: each backend's figures and its ratio to one Redis in the same run. */
export function renderBackends(rows: readonly BackendRow[], concurrency: number): string {
  const base = rows[0];
  const pairsPerS = (r: BackendRow) => median(r.pairs.map((x) => x.unitsPerSecond));
  const pairP99 = (r: BackendRow) => median(r.pairs.map((x) => x.latency.pair?.p99 ?? Number.NaN));
  const handOffP50 = (r: BackendRow) => median(r.hot.map((x) => x.handOffFromReleaseSent?.p50 ?? Number.NaN));
  const handOffP99 = (r: BackendRow) => median(r.hot.map((x) => x.handOffFromReleaseSent?.p99 ?? Number.NaN));
  const errors = (r: BackendRow) => [...r.pairs, ...r.hot].reduce((n, x) => n + Object.values(x.errors).reduce((a, b) => a + b, 0), 0);
  const lines = [
    `Concurrency ${concurrency}; median over rounds. Ratios are to one Redis in the same run.`,
    '',
    '| backend | pairs/s | pair p99 ms | hand-off p50 / p99 ms | pairs/s vs one Redis | pair p99 vs one Redis | non-200 answers |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    const ratio = base ? pairsPerS(r) / pairsPerS(base) : Number.NaN;
    const p99Ratio = base ? pairP99(r) / pairP99(base) : Number.NaN;
    lines.push(
      `| ${r.backend} | ${fmt(pairsPerS(r))} | ${fmt(pairP99(r), 1)} | ${fmt(handOffP50(r), 2)} / ${fmt(handOffP99(r), 2)} | ` +
        `${fmt(ratio, 2)} | ${fmt(p99Ratio, 2)} | ${errors(r)} |`,
    );
  }
  return lines.join('\n');
}
