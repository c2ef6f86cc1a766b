import { RedisServer, SHARED_REDIS_PORT_ENV } from '../helpers/redis-server.js';

/**
 * Vitest global setup of the mutation run's Redis part (test/mutants/vitest.config.ts): one
 * redis-server for each StrykerJS test runner, which the files that only talk to their server share
 * (RedisServer.startShared), each finding it emptied. Without it every such file started its own
 * server for every mutant's run. Vitest runs a global setup once per instance, and StrykerJS keeps one
 * instance per runner for all its mutants.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const server = await RedisServer.start();
  process.env[SHARED_REDIS_PORT_ENV] = String(server.port);
  return async () => {
    delete process.env[SHARED_REDIS_PORT_ENV];
    await server.stop();
  };
}
