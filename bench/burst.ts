import { spawn, type ChildProcess } from 'node:child_process';
import { RedisServer } from '../test/helpers/redis-server.js';
import { renderBurst, runBurst, type BurstResult } from '../test/helpers/burst.js';
import { ROOT, removeDir, startKeyholder, type OwnedProcess } from './procs.js';

/**
 * `npm run bench -- --only burst`: the overload scenario a user reported. 3,000 callers at once send
 * `acquire {"ttlMs":1000,"waitMs":3000}` on one held lock, spread over three keyholder instances
 * (production settings, open mode, no rate limit: every caller comes from one address) on one Redis.
 * Healthy Redis throughout, so the answers must be 200, 409, 429 or 503 overloaded, never
 * store_unavailable; /livez is probed from its own process all along (target: p99 <= 100 ms).
 */
export interface BurstSettings {
  readonly callers: number;
  readonly instances: number;
  readonly ttlMs: number;
  readonly waitMs: number;
  /** stress-ng --cpu workers run beside the burst (a host starved of CPU by other work); 0 or absent: none. */
  readonly stressCpu?: number;
}

export const DEFAULT_BURST: BurstSettings = { callers: 3000, instances: 3, ttlMs: 1000, waitMs: 3000 };

const PREFIX = 'burst:';

export async function measureBurst(
  settings: BurstSettings,
  dir: string,
  progress: (line: string) => void,
  /** The checkout whose dist/server.js answers (built already): ROOT, or another build for a before/after. */
  root = ROOT,
): Promise<{ result: BurstResult; text: string }> {
  const owned: OwnedProcess[] = [];
  let stress: ChildProcess | undefined;
  const redis = await RedisServer.start();
  const direct = redis.client();
  try {
    progress(`burst: starting ${settings.instances} keyholder instances`);
    const instances = await Promise.all(
      Array.from({ length: settings.instances }, (_, i) =>
        startKeyholder(
          `keyholder-${i}`,
          redis.url,
          dir,
          {
            KEYHOLDER_AUTH: 'open',
            RATE_LIMIT_MAX: '0',
            REDIS_KEY_PREFIX: PREFIX,
            LOG_LEVEL: 'warn',
          },
          [],
          root,
        ),
      ),
    );
    owned.push(...instances.map((k) => k.proc));
    if ((settings.stressCpu ?? 0) > 0) {
      progress(`burst: stress-ng --cpu ${settings.stressCpu} beside it`);
      stress = spawn('stress-ng', ['--cpu', String(settings.stressCpu), '--timeout', '600s'], { stdio: 'ignore' });
    }
    progress(`burst: ${settings.callers} callers at once, acquire ttlMs ${settings.ttlMs} waitMs ${settings.waitMs}`);
    const result = await runBurst({
      urls: instances.map((k) => k.url),
      redis: direct,
      keyPrefix: PREFIX,
      callers: settings.callers,
      key: 'hot',
      ttlMs: settings.ttlMs,
      waitMs: settings.waitMs,
    });
    const text =
      `### Burst\n\n${settings.callers} callers at once, \`acquire {"ttlMs":${settings.ttlMs},"waitMs":${settings.waitMs}}\` on one held lock, ` +
      `${settings.instances} instances on one Redis (healthy throughout)` +
      `${root === ROOT ? '' : `, the build in ${root}`}` +
      `${(settings.stressCpu ?? 0) > 0 ? `, beside stress-ng --cpu ${settings.stressCpu}` : ''}:\n\n${renderBurst(result)}\n`;
    return { result, text };
  } finally {
    stress?.kill('SIGTERM');
    direct.disconnect();
    for (const proc of owned.reverse()) await proc.stop().catch(() => undefined);
    await redis.stop();
    removeDir(dir);
  }
}
