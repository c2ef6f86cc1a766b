import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { renderBurst, runBurst } from '../helpers/burst.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Overload is answered, not suffered: 1,500 callers at once on one held lock, over three keyholder
 * processes sharing one healthy Redis, with the default budgets. Each caller is told the truth: 200
 * (granted), 409 (still held when its wait ended), 429 (the lock's queue is full) or 503 `overloaded`
 * (this instance refused before any store work); never `store_unavailable`, since Redis answers
 * throughout. Nobody but a caller answered 200 ever holds the lease (Redis's owner field is read all
 * along), and the liveness probe stays quick.
 */
const INSTANCES = 3;
const CALLERS = 1500;
const TTL_MS = 1000;
/**
 * 2.5 s: two hand-overs happen within it (at about 1 s and 2 s), and it ends between two, so a waiter's
 * wait does not end just as the lock is handed to it (which is safe, the lease is given back, but would
 * show a brief owner nobody was answered 200 with).
 */
const WAIT_MS = 2500;
const PREFIX = 'burst:';
/**
 * 429 quota_exceeded: the waiters of one key hold quota units of one shard, and a shard admits a
 * sixteenth of the namespace's default 10,000 (docs/limits.md, the sharded quota): past 625 callers
 * queued on the hot key, the next are told the namespace's quota is full, which is true.
 */
const ALLOWED = new Set(['200', '409 lock_held', '429 too_many_waiters', '429 quota_exceeded', '503 overloaded']);
/**
 * 100 ms: what the burst may add to /livez's p99. On a quiet machine /livez answers in a millisecond or
 * two, so this is the target itself (p99 <= 100 ms during the burst). On a machine busy with other
 * work, every probe also waits for the CPU whatever keyholder does: that share is measured, by the same
 * prober process for a second before and a second after the burst (result.livezIdle, the worse p99 of
 * the two), and added to the bound. So the bound is the machine's own delay plus 100 ms: the burst
 * may cost the probe no more than 100 ms at p99 however loaded the machine is.
 */
const LIVEZ_P99_BURST_BUDGET_MS = 100;

/**
 * The slow-client defence's timers (headers within 5 s, the first request within 5 s of connecting) are
 * wall-clock timers on the socket: on a machine so loaded that an instance does not read a request for
 * seconds (other test files at once: load averages of 30 on 2 cores were seen), they cut callers off
 * with 408 or a reset before the request is read. That defence is not what this test is about, so its
 * timers are set long here.
 */
/**
 * The keep-alive timeout likewise: a client reuses a kept-alive connection it believes fresh, while the
 * instance (both starved, each by its own clock) has just closed it as idle, and the caller sees "other
 * side closed" (seen at load 25). That race is the client's to retry, not what this test is about.
 */
const SLOW_CLIENT_TIMEOUTS = { HTTP_HEADERS_TIMEOUT_MS: '60000', HTTP_REQUEST_TIMEOUT_MS: '60000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000' };

/**
 * The production budgets: the test servers' default turns the event-loop budget off (ordinary tests on
 * a starved machine must not be shed), but this test is about what the defaults do to a burst.
 */
const DEFAULT_BUDGETS = { OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '100' };

let redis: RedisServer;
let direct: Redis;
const instances: KeyholderProcess[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  direct = redis.client();
  // One after another: three starting at once on a loaded machine can outlast a start's 60 s wait.
  for (let i = 0; i < INSTANCES; i++) {
    instances.push(
      await KeyholderProcess.start({
        compiled: true,
        env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: PREFIX, LOG_LEVEL: 'warn', ...SLOW_CLIENT_TIMEOUTS, ...DEFAULT_BUDGETS },
      }),
    );
  }
}, 300_000);

afterAll(async () => {
  direct?.disconnect();
  await Promise.all(instances.map((i) => i.stop()));
  await redis?.stop();
});

describe('a burst of callers on one held lock, three instances', () => {
  it('answers 200, 409, 429 or 503 overloaded; never store_unavailable; no lease to a caller told it failed', async () => {
    const result = await runBurst({
      urls: instances.map((i) => i.url),
      redis: direct,
      keyPrefix: PREFIX,
      callers: CALLERS,
      key: 'hot',
      ttlMs: TTL_MS,
      waitMs: WAIT_MS,
    });
    process.stdout.write(`[overload] ${CALLERS} callers, ${INSTANCES} instances\n${renderBurst(result)}\n`);
    const unavailable = instances.flatMap((i) => i.jsonLogs()).filter((l) => l.msg === 'store unavailable');
    if (unavailable.length > 0) process.stdout.write(`[overload] store unavailable: ${JSON.stringify(unavailable.slice(0, 5))}\n`);
    const kinds = Object.keys(result.answers);
    expect(kinds.filter((k) => !ALLOWED.has(k))).toEqual([]);
    expect(Object.values(result.answers).reduce((n, a) => n + a.count, 0)).toBe(CALLERS);
    // The lock passed from the first holder to at least one waiter, and each grant was someone's 200.
    expect(result.answers['200']?.count ?? 0).toBeGreaterThanOrEqual(1);
    // The only owners nobody was answered 200 for: leases a starved instance was too late to deliver (a
    // hand-over that ran out, or a grant answered so late it was given back); their callers were told 503
    // overloaded, and the lease went on to the next waiter.
    expect(result.orphanOwners).toBeLessThanOrEqual(result.handOversLost);
    expect(result.duplicateTokens).toBe(0);
    // The steady holders' renewals beside the burst: none refused by shedding, none told the store failed.
    // (A holder whose instance was starved of CPU by other processes for longer than its 3 s lease gets
    // 409 not_owner: that lease ran out; it is reported, not refused.)
    // A renewal answered too late to trust is 503 with its lease kept (the next renewal keeps it): not a refusal.
    expect(
      Object.keys(result.renewals).filter((k) => k !== '200' && k !== '409 not_owner' && !k.endsWith('(late answer, lease kept)')),
    ).toEqual([]);
    expect(result.livez.failed).toBe(0);
    expect(result.livezIdle.failed).toBe(0);
    expect(result.livez.p99Ms).toBeLessThanOrEqual(result.livezIdle.p99Ms + LIVEZ_P99_BURST_BUDGET_MS);
  }, 120_000);
});
