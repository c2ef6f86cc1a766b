import { EtcdCluster, SHARED_ETCD_PORTS_ENV } from '../helpers/etcd-cluster.js';

/**
 * Vitest global setup of the mutation run's etcd part (test/mutants/vitest.config.ts): one three-member
 * etcd cluster for each StrykerJS test runner, which the files that only talk to their cluster share
 * (EtcdCluster.startShared), each finding it emptied. Without it every such file started a cluster of its
 * own (three processes, a leader election) for every mutant's run.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const cluster = await EtcdCluster.start(3);
  process.env[SHARED_ETCD_PORTS_ENV] = cluster.members.map((m) => m.clientPort).join(',');
  return async () => {
    delete process.env[SHARED_ETCD_PORTS_ENV];
    await cluster.stop();
  };
}
