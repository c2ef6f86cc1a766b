import { FaultProxyHost, type RemoteFaultProxy } from '../helpers/fault-proxy-process.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

export interface ClusterOptions {
  /** Keep an append-only file so a Redis restart keeps the data. */
  readonly appendOnly: boolean;
  readonly instances?: number;
  /** Short, so a sick Redis turns into a quick 503 rather than a stalled request. */
  readonly commandTimeoutMs?: number;
  readonly keyPrefix?: string;
}

/**
 * One real redis-server, and N keyholder instances each reaching it through its own fault proxy:
 * keyholder[i] -> proxy[i] -> Redis. Faults injected at proxy[i] hit instance i only. The proxies run
 * in a process of their own (FaultProxyHost), not in the test's: see fault-proxy-process.ts.
 */
export class Cluster {
  private constructor(
    readonly redis: RedisServer,
    private readonly proxyHost: FaultProxyHost,
    readonly proxies: readonly RemoteFaultProxy[],
    readonly instances: readonly KeyholderProcess[],
    /** How long an instance waits for a Redis reply before it answers 503 (REDIS_COMMAND_TIMEOUT_MS). */
    readonly commandTimeoutMs: number,
  ) {}

  static async start(options: ClusterOptions): Promise<Cluster> {
    const redis = await RedisServer.start({ appendOnly: options.appendOnly });
    const count = options.instances ?? 3;
    const commandTimeoutMs = options.commandTimeoutMs ?? 250;
    const proxyHost = await FaultProxyHost.start();
    const proxies: RemoteFaultProxy[] = [];
    const instances: KeyholderProcess[] = [];
    try {
      for (let i = 0; i < count; i++) proxies.push(await proxyHost.proxy(redis.port));
      // One at a time: three tsx compilations at once on two cores only slow each other down.
      for (const proxy of proxies) {
        instances.push(
          await KeyholderProcess.start({
            env: {
              REDIS_URL: proxy.url,
              REDIS_COMMAND_TIMEOUT_MS: String(commandTimeoutMs),
              REDIS_KEY_PREFIX: options.keyPrefix ?? 'faults:',
              LOG_LEVEL: 'warn',
            },
          }),
        );
      }
    } catch (err) {
      await Promise.all(instances.map((i) => i.stop('SIGKILL')));
      await proxyHost.stop();
      await redis.stop();
      throw err;
    }
    return new Cluster(redis, proxyHost, proxies, instances, commandTimeoutMs);
  }

  get urls(): string[] {
    return this.instances.map((i) => i.url);
  }

  async stop(): Promise<void> {
    await Promise.all(this.instances.map((i) => i.stop('SIGKILL')));
    await this.proxyHost.stop();
    await this.redis.stop();
  }

  /** Log lines where an instance refused a store answer that came back too late to trust. */
  lateAnswersCaught(instance: number): number {
    return (this.instances[instance]?.logs ?? []).filter((l) => l.includes('too late to trust')).length;
  }
}
