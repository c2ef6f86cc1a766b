import type { RedisClient } from './client.js';
import { KeySpace } from './keys.js';
import { parseRateAllowance } from './replies.js';
import { defineScripts, type Scripts } from './scripts.js';

/**
 * The rate limiter's shared counters in Redis: each call hands this instance a batch of allowance from
 * one caller's window (rate-allowance.lua). One script call per batch, not per request.
 */
export class RedisRateAllowance {
  private readonly scripts: Scripts;
  private readonly keys: KeySpace;

  constructor(redis: RedisClient, keyPrefix: string) {
    this.scripts = defineScripts(redis);
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
