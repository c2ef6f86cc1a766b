import type { RedisClient } from './client.js';
import { KeySpace } from './keys.js';
import { parseRateAllowance } from './replies.js';
import { defineScripts, type Scripts } from './scripts.js';

/**
 * The rate limiter's shared counters in Redis: each call hands this instance a batch of allowance from
 * one caller's window (rate-allowance.lua). One script call per batch, not per request.
 *
 * `masterWaitMs`, on a Cluster: how long a call waits for the connection to its window's master when
 * that connection is being made anew (masterGate, nodes.ts); without the wait, every call sent
 * together right after a master's connection was dropped but the first was refused, and the requests
 * behind them went through uncounted (the limiter skips on error).
 */
export class RedisRateAllowance {
  private readonly scripts: Scripts;
  private readonly keys: KeySpace;

  constructor(redis: RedisClient, keyPrefix: string, masterWaitMs?: number) {
    this.scripts = defineScripts(redis, masterWaitMs === undefined ? {} : { masterWaitMs });
    this.keys = new KeySpace(keyPrefix);
  }

  async handOut(
    rateKey: string,
    wanted: number,
    max: number,
    windowMs: number,
  ): Promise<{ granted: number; windowLeftMs: number; handedOut: number }> {
    return parseRateAllowance(await this.scripts.run('rateAllowance', { windowKey: this.keys.rateWindow(rateKey), windowMs, max, wanted }));
  }
}
