import type { RedisClient } from './client.js';
import { KeySpace } from './keys.js';
import { parseRateLease } from './replies.js';
import { defineScripts, type Scripts } from './scripts.js';

/**
 * The rate limiter's shared counters in Redis: each call hands this instance a batch of permits from
 * one caller's window (rate-lease.lua). One script call per batch, not per request.
 */
export class RedisRatePermits {
  private readonly scripts: Scripts;
  private readonly keys: KeySpace;

  constructor(redis: RedisClient, keyPrefix: string) {
    this.scripts = defineScripts(redis);
    this.keys = new KeySpace(keyPrefix);
  }

  async lease(
    rateKey: string,
    wanted: number,
    max: number,
    windowMs: number,
  ): Promise<{ granted: number; windowLeftMs: number; handedOut: number }> {
    return parseRateLease(await this.scripts.run('rateLease', { windowKey: this.keys.rateWindow(rateKey), windowMs, max, wanted }));
  }
}
