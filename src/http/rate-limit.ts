import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RateLimitedError } from '../domain/errors.js';
import type { RedisClient } from '../store/redis/client.js';
import { accessOf } from './auth.js';

export interface RateLimitSettings {
  /** Requests one API key may make per window; 0 turns rate limiting off. */
  readonly max: number;
  readonly windowMs: number;
  /**
   * Shared counters, so N instances allow `max` per key in total rather than N x max. On a Redis
   * Cluster each counter is one key updated by a one-key script, so it works unchanged (the counters
   * spread over the masters). Its own client
   * (never the lock store's): see server.ts for the options that keep a Redis outage from hanging or
   * failing lock calls.
   */
  readonly redis?: RedisClient;
  /** Prefix of the counters' Redis keys. */
  readonly keyPrefix?: string;
}

/** Authenticated callers are counted by key id (whatever address they call from); open mode by address. */
function rateKey(request: FastifyRequest): string {
  const principal = request.principal;
  return principal && !principal.anonymous ? `key:${principal.keyId}` : `ip:${request.ip}`;
}

/**
 * Per-key request rate with @fastify/rate-limit. It counts acquire, inspect and the admin routes. Renew
 * and release opt out in their route config (`rateLimit: false`): they are bounded by the leases a key
 * holds (which the namespace quota caps), and refusing one would take a lease away from a caller whose
 * only fault is sharing a key with a noisy poller. Public routes are never counted either. It must be registered after the auth hook and before
 * the routes: it adds its own onRequest hook to each route registered after it, and route hooks run
 * after the root's, so it sees the authenticated principal and never counts requests refused with 401.
 * `skipOnError`: if the counter store fails, requests go through uncounted rather than failing; the
 * lock calls themselves then answer from the lock store (503 if it is the same Redis and it is down).
 */
export async function registerRateLimit(app: FastifyInstance, settings: RateLimitSettings): Promise<void> {
  if (settings.max <= 0) return;
  await app.register(fastifyRateLimit, {
    global: true,
    max: settings.max,
    timeWindow: settings.windowMs,
    keyGenerator: rateKey,
    allowList: (request) => accessOf(request) === 'public',
    skipOnError: true,
    ...(settings.redis ? { redis: settings.redis, nameSpace: `${settings.keyPrefix ?? ''}ratelimit:` } : {}),
    errorResponseBuilder: (_request, context) => new RateLimitedError(context.ttl),
  });
}
