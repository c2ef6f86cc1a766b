import { z } from 'zod';
import type { LeaseLimits } from './domain/limits.js';
import type { LoadBudget } from './http/load-shedding.js';
import type { AccessLogSettings } from './observability/request-log.js';
import type { WarmUpSettings } from './warm-up.js';

/**
 * Environment -> configuration, parsed once at start-up. Every variable has a default that is safe for
 * a developer's laptop; production must say explicitly when it wants the embedded store.
 */

/** An integer from an env string; empty strings count as unset so `FOO=` falls back to the default. */
const intFromEnv = (min: number, max: number, fallback: number) =>
  z.preprocess(envNumber, z.number().int().min(min).max(max).default(fallback));

/** The same with no default: unset stays undefined (the caller derives the value). */
const optionalIntFromEnv = (min: number, max: number) => z.preprocess(envNumber, z.number().int().min(min).max(max).optional());

function envNumber(v: unknown): number | undefined {
  return typeof v === 'string' && v.trim() !== '' ? Number(v) : undefined;
}

const emptyAsUndefined = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

/** The URL, or null when it does not parse (another check reports that). */
function urlOrNull(value: string): URL | null {
  try {
    return new URL(value);
  } catch {
    return null;
  }
}

/**
 * An item of a list as an error message may show it: any `user:password@` before the host left out,
 * so a password that was put in the list by mistake is not printed (the error goes to the logs).
 */
function shownItem(item: string): string {
  return item.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?[^@/]*@/, '$1***@');
}

/** `host:port,host:port`: the seed list of a Sentinel set or a Cluster. */
const hostPortList = z.string().transform((v, ctx) => {
  const out: HostPort[] = [];
  for (const item of v
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '')) {
    const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(item);
    const port = m ? Number(m[2]) : 0;
    if (!m || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `"${shownItem(item)}" is not host:port` });
      return z.NEVER;
    }
    out.push({ host: (m[1] as string).replace(/^\[|\]$/g, ''), port });
  }
  if (out.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'must list at least one host:port' });
    return z.NEVER;
  }
  return out;
});

/** `http://host:port,...`: etcd client URLs. */
const urlList = z.string().transform((v, ctx) => {
  const out = v
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  for (const item of out) {
    if (!/^https?:\/\/[^/\s]+\/?$/.test(item)) {
      ctx.addIssue({ code: 'custom', message: `"${shownItem(item)}" is not an http(s)://host:port URL` });
      return z.NEVER;
    }
  }
  if (out.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'must list at least one URL' });
    return z.NEVER;
  }
  return out;
});

export const EnvSchema = z
  .object({
    NODE_ENV: z
      .preprocess(emptyAsUndefined, z.enum(['development', 'production', 'test']).default('development'))
      .describe(
        '`production` requires `REDIS_URL` (or `KEYHOLDER_STORE=memory`) and `KEYHOLDER_API_KEYS_FILE` (or `KEYHOLDER_AUTH=open`).',
      ),
    /** 3000: the documented default; callers configure it once. */
    PORT: intFromEnv(0, 65535, 3000).describe('TCP port to listen on.'),
    /** Loopback by default so a laptop never exposes an open lock service; containers set 0.0.0.0. */
    HOST: z
      .preprocess(emptyAsUndefined, z.string().min(1).default('127.0.0.1'))
      .describe('Address to listen on. Loopback by default so a laptop never exposes the service; containers set `0.0.0.0`.'),
    LOG_LEVEL: z
      .preprocess(emptyAsUndefined, z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'))
      .describe(
        'Least severe level logged. Logs are JSON lines on stdout: request lines at info are written in batches (within 200 ms), every other line at once.',
      ),
    /**
     * A line per request costs about as much CPU as the lock call itself under load, and most of them
     * say "200"; `sampled` keeps what an operator reads (see docs/operations.md#logs-and-shutdown).
     */
    ACCESS_LOG: z
      .preprocess(emptyAsUndefined, z.enum(['sampled', 'full']).default('sampled'))
      .describe(
        'Request lines at info: `sampled` writes a count per route and status every `ACCESS_LOG_SUMMARY_MS` and one request line ' +
          'in `ACCESS_LOG_SAMPLE_EVERY`; `full` writes one line per request. Either way every 5xx answer, every slow request and every ' +
          'warning, error and audit line is written. See [Logs](operations.md#logs-and-shutdown).',
      ),
    ACCESS_LOG_SAMPLE_EVERY: intFromEnv(0, 1_000_000, 100).describe(
      'With `ACCESS_LOG=sampled`: one request line in this many is written in full (0: none).',
    ),
    ACCESS_LOG_SUMMARY_MS: intFromEnv(100, 3_600_000, 10_000).describe(
      'With `ACCESS_LOG=sampled`: how often the count of answered requests by route and status is written (nothing when there were none).',
    ),
    /** 1 s past what the caller asked to wait: a lock call takes milliseconds; this is a stuck store or a starved process. */
    SLOW_REQUEST_MS: intFromEnv(1, 3_600_000, 1_000).describe(
      'A request answered this much later than the `waitMs` it asked for (0 when none) is written as a warning, whatever `ACCESS_LOG` says.',
    ),
    /** Unset means the embedded store: zero setup, but locks live in this process only. */
    REDIS_URL: z
      .preprocess(
        emptyAsUndefined,
        z
          .url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' })
          // The path is the database number (ioredis sends SELECT with it): anything else is a SELECT of
          // NaN that Redis refuses, which crashed the process with a stack trace at its first connection.
          .refine((url) => /^(\/(\d{1,9})?)?$/.test(urlOrNull(url)?.pathname ?? ''), {
            error: 'the path after host:port must be empty or a database number, such as /0',
          })
          .refine((url) => /^\d{1,9}$/.test(urlOrNull(url)?.searchParams.get('db') ?? '0'), {
            error: 'its db parameter must be a database number',
          })
          .optional(),
      )
      .describe(
        '`redis://` or `rediss://` URL of the Redis that holds the locks; its path, if any, is a database number (`/0`), and one the Redis refuses stops the service. Unset: the embedded store.',
      ),
    /**
     * Which store to use. `auto` picks Redis when REDIS_URL is set, the embedded store otherwise.
     * Production must name `memory` explicitly to run on the embedded store, because a second instance
     * would silently hand out the same locks again.
     */
    KEYHOLDER_STORE: z
      .preprocess(emptyAsUndefined, z.enum(['auto', 'memory', 'redis', 'etcd']).default('auto'))
      .describe(
        'Which store holds the locks: `auto` is Redis when `REDIS_URL`, `REDIS_SENTINELS` or `REDIS_CLUSTER_NODES` is set, the embedded store otherwise; `etcd` needs `ETCD_ENDPOINTS`.',
      ),
    /**
     * Redis behind Sentinel: the sentinels to ask for the current primary (host:port,...). keyholder
     * follows a failover by itself; calls during the switch answer 503.
     */
    REDIS_SENTINELS: z
      .preprocess(emptyAsUndefined, hostPortList.optional())
      .describe(
        '`host:port,...` of Redis Sentinels: keyholder asks them for the primary and follows a failover by itself. Instead of `REDIS_URL`; see [Scaling out](scaling.md).',
      ),
    /**
     * Redis Cluster: some of its nodes (host:port,...); the client learns the others and the slot map
     * from them, follows MOVED/ASK redirections and a master failover by itself.
     */
    REDIS_CLUSTER_NODES: z
      .preprocess(emptyAsUndefined, hostPortList.optional())
      .describe(
        '`host:port,...` of some Redis Cluster nodes (one is enough, more survive one being down at start): keyholder learns the rest and follows failovers and resharding. Instead of `REDIS_URL`; see [Scaling out](scaling.md#redis-cluster).',
      ),
    /** The primary's name as the sentinels know it (`sentinel monitor <name> ...`). */
    REDIS_SENTINEL_NAME: z
      .preprocess(
        emptyAsUndefined,
        z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 characters of A-Z a-z 0-9 . _ -')
          .optional(),
      )
      .describe("The primary's name in `sentinel monitor <name> ...`; required with `REDIS_SENTINELS`."),
    /**
     * 0: answer a grant once the primary has it (Redis replication is asynchronous). n > 0: answer a
     * grant or renewal only once WAIT confirms n replicas have it, so a failover to one of them keeps the lease.
     */
    REDIS_MIN_REPLICA_ACKS: intFromEnv(0, 16, 0).describe(
      'Replicas that must confirm (`WAIT`) each grant and renewal before it is answered; fewer in time: the grant is rolled back and the caller gets 503.',
    ),
    /**
     * 100 ms: a healthy replica on the same network acknowledges in about a millisecond; past this the
     * grant is rolled back and the caller gets a 503 rather than a lease a failover could lose.
     */
    REDIS_REPLICA_ACK_TIMEOUT_MS: intFromEnv(1, 60_000, 100).describe(
      'How long a grant waits for those replicas; must be below `REDIS_COMMAND_TIMEOUT_MS`.',
    ),
    /** The etcd cluster's client URLs (http://host:port,...), for KEYHOLDER_STORE=etcd. */
    ETCD_ENDPOINTS: z
      .preprocess(emptyAsUndefined, urlList.optional())
      .describe('`http://host:port,...` of the etcd members, for `KEYHOLDER_STORE=etcd`.'),
    /** Prefix of every etcd key this service writes, so it can share an etcd cluster with other data. */
    ETCD_KEY_PREFIX: z
      .preprocess(
        emptyAsUndefined,
        z
          .string()
          .regex(/^[A-Za-z0-9/:_.-]{0,64}$/, 'must be up to 64 characters of A-Z a-z 0-9 / : _ . -')
          .default('keyholder/'),
      )
      .describe('Prefix of every etcd key keyholder writes.'),
    /**
     * 2 s: an etcd write is a Raft commit (one round trip to a quorum and an fsync), and a leader
     * election takes about a second; past this the caller gets a 503 rather than a hang.
     */
    ETCD_COMMAND_TIMEOUT_MS: intFromEnv(10, 60_000, 2_000).describe(
      'Longest wait for one etcd call (a Raft commit; an election takes about a second); past it, 503.',
    ),
    /** Prefix of every Redis key this service writes, so it can share a Redis with other data. */
    REDIS_KEY_PREFIX: z
      .preprocess(
        emptyAsUndefined,
        z
          .string()
          .regex(/^[A-Za-z0-9:_.-]{0,64}$/, 'must be up to 64 characters of A-Z a-z 0-9 : _ . -')
          .default('keyholder:'),
      )
      .describe('Prefix of every Redis key keyholder writes, so it can share a Redis with other data.'),
    /**
     * 500 ms: a healthy Redis answers a lock script in well under a millisecond, so a command that takes
     * this long means Redis is sick; callers get a quick 503 instead of waiting for the OS TCP timeout.
     */
    REDIS_COMMAND_TIMEOUT_MS: intFromEnv(10, 60_000, 500).describe(
      'Longest wait for one Redis command; past it the caller gets 503 `store_unavailable`.',
    ),
    /** 100 ms: shorter leases expire before a network round trip completes and protect nothing. */
    LOCK_MIN_TTL_MS: intFromEnv(1, 86_400_000, 100).describe('Shortest lease a caller may ask for.'),
    /** 1 hour: a longer lease means a crashed holder blocks everyone for that long; renew instead. */
    LOCK_MAX_TTL_MS: intFromEnv(1, 86_400_000, 3_600_000).describe('Longest lease a caller may ask for (1 hour); longer work renews.'),
    /** 60 s: the longest a caller may wait for a held lock; long polls past a minute are better retried. */
    LOCK_MAX_WAIT_MS: intFromEnv(0, 600_000, 60_000).describe(
      'Longest `waitMs` a caller may ask for; above it, 400, whose problem body names this bound (`maxWaitMs`).',
    ),
    /**
     * 60 s: the longest lock-delay a caller may ask for. A delay keeps a lock unusable after its holder
     * vanished, so it is short. The bound in force is the lower of this and FENCE_GRACE_MS (the lock's
     * state, which carries the delay, must outlive it), so a short grace never makes a config invalid.
     */
    LOCK_MAX_DELAY_MS: intFromEnv(0, 600_000, 60_000).describe(
      'Longest `lockDelayMs` a caller may ask for (and never above `FENCE_GRACE_MS`); above it, 400.',
    ),
    /** 1000: callers queued on one lock at once (across instances); beyond it, 429 too_many_waiters. */
    WAITERS_PER_KEY_MAX: intFromEnv(1, 1_000_000, 1000).describe(
      'Callers queued on one lock at once, across all instances; beyond it, 429 `too_many_waiters`.',
    ),
    /** 10,000: callers one instance keeps waiting at once; each costs memory and an open connection. */
    WAITERS_PER_INSTANCE_MAX: intFromEnv(1, 1_000_000, 10_000).describe(
      'Callers one instance keeps waiting at once; beyond it, 429 `too_many_waiters`.',
    ),
    /**
     * Unset: a tenth of WAITERS_PER_INSTANCE_MAX (1,000 of the default 10,000), so one team's queued
     * callers cannot fill the waiting room the other teams share; lowering the instance cap lowers it
     * with it. Set explicitly, it must stay below the instance cap (checked below).
     */
    WAITERS_PER_NAMESPACE_MAX: optionalIntFromEnv(1, 1_000_000).describe(
      'Callers of one namespace one instance keeps waiting at once, so one team cannot fill the waiting room the others share; beyond it, 429 `too_many_waiters`. ' +
        'Unset: a tenth of `WAITERS_PER_INSTANCE_MAX` (at least 1); set, it must be below `WAITERS_PER_INSTANCE_MAX`.',
    ),
    /**
     * 100 ms: the mean event-loop delay (sampled every 100 ms) past which new requests get 503
     * overloaded. An instance that late answers every call late, and past the Redis command timeout its
     * own lateness would look like the store's; a healthy instance's mean stays in single milliseconds.
     */
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: intFromEnv(0, 60_000, 100).describe(
      'Event-loop delay (ms) past which new requests get 503 `overloaded`: the mean sampled every 100 ms, or how long the running turn has kept the loop from coming round. Renewals and releases are never refused for it. 0: off.',
    ),
    /**
     * 500: requests one instance works on at once (waiting callers not counted): four times the
     * benchmark's busiest client, and about what a 2-core instance turns round in a tenth of a second.
     */
    OVERLOAD_MAX_REQUESTS_IN_FLIGHT: intFromEnv(0, 1_000_000, 500).describe(
      'Requests one instance works on at once (callers waiting in a queue not counted); beyond it, new requests get 503 `overloaded`, renewals and releases only beyond 4 times it. 0: off.',
    ),
    /**
     * 5,000: callers waiting on one instance at once past which new requests (not renewals or
     * releases) get 503 overloaded: each wait holds a connection, a timer and heartbeat work. Below
     * WAITERS_PER_INSTANCE_MAX, so an instance slows new work down before its waiting room is full.
     */
    OVERLOAD_MAX_OPEN_WAITS: intFromEnv(0, 1_000_000, 5_000).describe(
      'Callers waiting on one instance past which new requests (never renewals or releases) get 503 `overloaded`. 0: off.',
    ),
    /**
     * 3,000 cycles within 2 s: a cold instance costs about 1.5 ms of CPU per acquire/release pair, a warm
     * one 0.18 ms, and it takes about 3,000 pairs to get there; a start on a busy host is bounded by the time.
     */
    WARM_UP_CYCLES: intFromEnv(0, 1_000_000, 3_000).describe(
      'Acquire/renew/release cycles a new instance runs through its own request path, against a throw-away in-memory store (never the real one), before `/readyz` answers 200; it answers 503 `warming_up` meanwhile. 0: no warm-up.',
    ),
    WARM_UP_MAX_MS: intFromEnv(0, 60_000, 2_000).describe(
      'Most time (ms) the warm-up takes; `/readyz` answers 200 when it ends, whatever was left. 0: no warm-up.',
    ),
    /**
     * 10 minutes: how long a key's fencing counter outlives its lease. The counter is not what keeps
     * tokens increasing (the store clock floor does); it only covers bursts of grants that ran ahead
     * of the clock and small clock steps. After it, an idle key leaves no state behind.
     */
    FENCE_GRACE_MS: intFromEnv(1_000, 7 * 86_400_000, 600_000).describe(
      "How long a key's fencing counter outlives its lease (10 minutes); after it an idle key leaves no state.",
    ),
    HISTORY: z
      .preprocess(emptyAsUndefined, z.enum(['on', 'off']).default('off'))
      .describe(
        'Lease history (`GET .../{key}/history`): `on` records every grant, renewal, release and force release, written in ' +
          'batches off the request path; `off` records nothing and the history routes answer empty. See docs/operations.md#lease-history.',
      ),
    HISTORY_EVENTS_PER_KEY: intFromEnv(1, 10_000, 50).describe('Lease history: events kept per key; the oldest go first.'),
    HISTORY_KEYS_PER_NAMESPACE: intFromEnv(1, 1_000_000, 5_000).describe(
      'Lease history: keys (of all primitives) with a history kept per namespace; the least recently written go first. ' +
        'On Redis counted per quota shard (this / 16, rounded up, each).',
    ),
    HISTORY_RETENTION_MS: intFromEnv(1_000, 30 * 86_400_000, 2 * 86_400_000).describe(
      'Lease history: events older than this are dropped (2 days by default, so yesterday is there all of today).',
    ),
    HISTORY_FLUSH_MS: intFromEnv(1, 10_000, 100).describe(
      'Lease history: how long an event waits in the in-process buffer before its batch is written; a crash loses at most this much ' +
        '(twice this for a grant whose release had not come yet: one recorded in the last half of a wait is left for the next batch, once, so its release folds into it). ' +
        'Longer batches cost less per event (a grant and its release often share one).',
    ),
    /** 10 s: how long a graceful shutdown waits for in-flight requests before closing anyway. */
    SHUTDOWN_TIMEOUT_MS: intFromEnv(0, 600_000, 10_000).describe(
      "How long SIGTERM waits for in-flight requests before exiting anyway. Keep the orchestrator's grace period longer (compose: `stop_grace_period: 15s`).",
    ),
    /** The API keys file (YAML or JSON, hashes only). Unset means open mode, which production must ask for. */
    KEYHOLDER_API_KEYS_FILE: z
      .preprocess(emptyAsUndefined, z.string().min(1).optional())
      .describe('Path of the API keys file (YAML or JSON, hashes only); see [Security](security.md#api-keys). Unset: open mode.'),
    /** `open` runs without API keys on purpose; `keys` insists on the keys file. Unset: keys if the file is set. */
    KEYHOLDER_AUTH: z
      .preprocess(emptyAsUndefined, z.enum(['keys', 'open']).optional())
      .describe(
        '`open` runs without keys on purpose (required for that with `NODE_ENV=production`); `keys` insists on the file. Unset: keys if the file is set.',
      ),
    /**
     * 20,000 counted requests per 10 s per API key (2,000/s on average). Only acquire, inspect and admin
     * calls count (renew and release never do), so a team of a few hundred workers each acquiring and
     * polling a few times a second stays well under it, while a client spinning in a tight loop (several
     * thousand requests a second) is slowed to it. 0 turns it off.
     */
    RATE_LIMIT_MAX: intFromEnv(0, 10_000_000, 20_000).describe(
      'Counted requests (acquire, inspect, admin; never renew or release) per API key per window; 0 turns the limit off.',
    ),
    RATE_LIMIT_WINDOW_MS: intFromEnv(100, 3_600_000, 10_000).describe("The rate limit's window."),
    /**
     * 10,000 locks held at once per namespace: far above what a team's workers hold, and it bounds the
     * memory one leaking client can pin in the store. 0 means no cap (and no quota bookkeeping).
     */
    NAMESPACE_MAX_HELD_LOCKS: intFromEnv(0, 100_000_000, 10_000).describe('Locks one namespace may hold at once; 0: no cap.'),
    /**
     * Fastify's trustProxy: whether X-Forwarded-For (and -Proto, -Host) from the peer are believed, which
     * decides the client address open mode counts rate limits by and the logs show. Unset/false: the
     * socket's peer is the client. Behind a load balancer: `true` (trust any peer; only when nothing
     * else can reach the port), a hop count (`1`), or the balancers' addresses/CIDRs, comma-separated.
     */
    TRUST_PROXY: z
      .preprocess(
        emptyAsUndefined,
        z
          .string()
          .regex(
            /^(true|false|\d{1,2}|[0-9A-Fa-f.:/]+(\s*,\s*[0-9A-Fa-f.:/]+)*)$/,
            'must be true, false, a hop count, or comma-separated addresses/CIDRs',
          )
          .default('false'),
      )
      .describe(
        "Fastify's `trustProxy`: whether `X-Forwarded-For` from the peer names the client (the address open mode rate-limits by " +
          'and logs show). Behind a load balancer: `true` (only if nothing else can reach the port), a hop count such as `1`, ' +
          "or the balancers' addresses/CIDRs, comma-separated.",
      ),
    /**
     * Traces: the OpenTelemetry SDK reads the OTEL_* variables itself (endpoint, protocol, sampler,
     * service name, ...); keyholder only decides whether to load it. Its own default exporter is OTLP,
     * which would make every keyholder export; here tracing is off until asked for.
     */
    OTEL_TRACES_EXPORTER: z
      .preprocess(
        emptyAsUndefined,
        z
          .string()
          // The SDK only warns (through a diagnostics logger nobody set) about a name it does not know,
          // and traces nothing: a typo turned tracing off in silence.
          .regex(
            /^\s*(otlp|zipkin|console|none)\s*(,\s*(otlp|zipkin|console|none)\s*)*$/,
            'must be otlp, zipkin, console or none (comma-separated)',
          )
          .optional(),
      )
      .describe(
        'Turns tracing on: `otlp` sends OpenTelemetry spans (one per API call, with the queue wait and store calls as children); ' +
          '`console` prints them. Unset or `none`: off, and nothing of OpenTelemetry is loaded. The SDK reads the other `OTEL_*` ' +
          'variables itself; see [Operations](operations.md#tracing).',
      ),
    OTEL_EXPORTER_OTLP_ENDPOINT: z
      .preprocess(emptyAsUndefined, z.string().optional())
      .describe(
        "Where OTLP spans go (the SDK's default: `http://localhost:4318`, with `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`). Set alone, it turns tracing on too.",
      ),
    OTEL_SDK_DISABLED: z
      .preprocess(emptyAsUndefined, z.enum(['true', 'false']).optional())
      .describe('`true`: no tracing, whatever else is set.'),
    /** 10 s for a whole request (headers and body) to arrive; valid bodies are under 5 KB. */
    HTTP_REQUEST_TIMEOUT_MS: intFromEnv(100, 600_000, 10_000).describe('A whole request (headers and body) must arrive within this.'),
    /** 5 s for the headers: a client dribbling them a byte at a time (slowloris) is cut off here. */
    HTTP_HEADERS_TIMEOUT_MS: intFromEnv(100, 600_000, 5_000).describe(
      'Request headers must arrive within this (slow clients are cut off); at most `HTTP_REQUEST_TIMEOUT_MS`.',
    ),
    /** 5 s: an idle keep-alive connection is closed; clients reconnect cheaply. */
    HTTP_KEEP_ALIVE_TIMEOUT_MS: intFromEnv(100, 600_000, 5_000).describe('An idle keep-alive connection is closed after this.'),
    /**
     * 75 s without any traffic on a socket closes it. It must outlast the longest response the server
     * takes to produce (a server-side wait of up to LOCK_MAX_WAIT_MS), so it is long; the two timeouts above are what
     * stop slow clients. 0 disables it.
     */
    HTTP_CONNECTION_TIMEOUT_MS: intFromEnv(0, 3_600_000, 75_000).describe(
      'A socket with no traffic either way is closed after this (0: never); longer than `LOCK_MAX_WAIT_MS`.',
    ),
    /**
     * Unset: the open-file limit less the descriptors the process needs for itself (see
     * connection-budget.ts), so a flood of sockets is refused by keyholder before the kernel refuses
     * keyholder its store connection.
     */
    HTTP_MAX_CONNECTIONS: optionalIntFromEnv(1, 10_000_000).describe(
      "Connections one instance keeps open at once; past it a new connection's requests get 503 `overloaded` and it is closed " +
        '(probes, metrics, renewals and releases are still served). Unset: the open-file limit less 320 descriptors kept for the store and probes.',
    ),
  })
  .superRefine((env, ctx) => {
    if (
      env.WAITERS_PER_NAMESPACE_MAX !== undefined &&
      env.WAITERS_PER_INSTANCE_MAX > 1 &&
      env.WAITERS_PER_NAMESPACE_MAX >= env.WAITERS_PER_INSTANCE_MAX
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['WAITERS_PER_NAMESPACE_MAX'],
        message: `must be below WAITERS_PER_INSTANCE_MAX (${env.WAITERS_PER_INSTANCE_MAX}), or one namespace's waiters can take every waiting slot and refuse every other team's`,
      });
    }
    if (env.KEYHOLDER_AUTH === 'keys' && env.KEYHOLDER_API_KEYS_FILE === undefined) {
      ctx.addIssue({ code: 'custom', path: ['KEYHOLDER_API_KEYS_FILE'], message: 'is required when KEYHOLDER_AUTH=keys' });
    }
    if (env.KEYHOLDER_AUTH === 'open' && env.KEYHOLDER_API_KEYS_FILE !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['KEYHOLDER_AUTH'],
        message: 'is open but KEYHOLDER_API_KEYS_FILE is set; unset one of them so it is clear whether keys are checked',
      });
    }
    if (env.NODE_ENV === 'production' && env.KEYHOLDER_API_KEYS_FILE === undefined && env.KEYHOLDER_AUTH !== 'open') {
      ctx.addIssue({
        code: 'custom',
        path: ['KEYHOLDER_API_KEYS_FILE'],
        message:
          'is not set and NODE_ENV=production: without API keys anyone who can reach the service can take and ' +
          'force-release every lock. Set KEYHOLDER_API_KEYS_FILE, or set KEYHOLDER_AUTH=open to run without keys on purpose',
      });
    }
    if (env.HTTP_CONNECTION_TIMEOUT_MS > 0 && env.HTTP_CONNECTION_TIMEOUT_MS <= env.LOCK_MAX_WAIT_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['HTTP_CONNECTION_TIMEOUT_MS'],
        message: `must be longer than LOCK_MAX_WAIT_MS (${env.LOCK_MAX_WAIT_MS}), or a waiting caller's connection is cut`,
      });
    }
    if (env.HTTP_HEADERS_TIMEOUT_MS > env.HTTP_REQUEST_TIMEOUT_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['HTTP_HEADERS_TIMEOUT_MS'],
        message: `must not exceed HTTP_REQUEST_TIMEOUT_MS (${env.HTTP_REQUEST_TIMEOUT_MS})`,
      });
    }
    if (env.LOCK_MIN_TTL_MS > env.LOCK_MAX_TTL_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['LOCK_MIN_TTL_MS'],
        message: `must not exceed LOCK_MAX_TTL_MS (${env.LOCK_MAX_TTL_MS})`,
      });
    }
    const redisWays = (['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES'] as const).filter((k) => env[k] !== undefined);
    if (redisWays.length > 1) {
      ctx.addIssue({
        code: 'custom',
        path: [redisWays[1] as string],
        message: `cannot be combined with ${redisWays[0]}; set one way to reach Redis`,
      });
    }
    if (env.REDIS_SENTINELS !== undefined && env.REDIS_SENTINEL_NAME === undefined) {
      ctx.addIssue({ code: 'custom', path: ['REDIS_SENTINEL_NAME'], message: 'is required with REDIS_SENTINELS' });
    }
    if (env.REDIS_SENTINELS === undefined && env.REDIS_SENTINEL_NAME !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_SENTINEL_NAME'],
        message:
          'is set but REDIS_SENTINELS is not; it only names the primary the sentinels are asked for, so set REDIS_SENTINELS or unset it',
      });
    }
    if (env.KEYHOLDER_STORE === 'redis' && redisWays.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_URL'],
        message: 'is required when KEYHOLDER_STORE=redis (or REDIS_SENTINELS, or REDIS_CLUSTER_NODES)',
      });
    }
    if (env.KEYHOLDER_STORE === 'etcd' && env.ETCD_ENDPOINTS === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ETCD_ENDPOINTS'], message: 'is required when KEYHOLDER_STORE=etcd' });
    }
    if ((env.KEYHOLDER_STORE === 'memory' || env.KEYHOLDER_STORE === 'etcd') && redisWays.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['KEYHOLDER_STORE'],
        message: `is ${env.KEYHOLDER_STORE} but ${redisWays[0]} is set; unset one of them so the store in use is unambiguous`,
      });
    }
    if (env.KEYHOLDER_STORE !== 'etcd' && env.ETCD_ENDPOINTS !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['ETCD_ENDPOINTS'], message: 'is set but KEYHOLDER_STORE is not etcd' });
    }
    const redisInUse = env.KEYHOLDER_STORE === 'redis' || (env.KEYHOLDER_STORE === 'auto' && redisWays.length > 0);
    if (env.REDIS_MIN_REPLICA_ACKS > 0 && !redisInUse) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_MIN_REPLICA_ACKS'],
        message: `is ${env.REDIS_MIN_REPLICA_ACKS} but the store is not Redis, so no grant would wait for a replica; unset it or use Redis`,
      });
    }
    if (env.REDIS_MIN_REPLICA_ACKS > 0 && env.REDIS_REPLICA_ACK_TIMEOUT_MS >= env.REDIS_COMMAND_TIMEOUT_MS) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_REPLICA_ACK_TIMEOUT_MS'],
        message: `must be shorter than REDIS_COMMAND_TIMEOUT_MS (${env.REDIS_COMMAND_TIMEOUT_MS}), or the wait is cut off as a timeout`,
      });
    }
    if (env.NODE_ENV === 'production' && env.KEYHOLDER_STORE === 'auto' && redisWays.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_URL'],
        message:
          'is not set and NODE_ENV=production: the embedded store keeps locks in this one process. ' +
          'Set REDIS_URL, or set KEYHOLDER_STORE=memory to run on the embedded store on purpose',
      });
    }
  });

/** A `host:port` of a seed list (REDIS_SENTINELS, REDIS_CLUSTER_NODES). */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * Which store to use and how to reach it. Written here, in the configuration's own words, so that this
 * module depends on no store; createStore takes any value of this shape.
 */
export type StoreConfig =
  | { readonly kind: 'memory' }
  | {
      readonly kind: 'redis';
      readonly connection:
        | { readonly mode: 'standalone'; readonly url: string }
        | { readonly mode: 'sentinel'; readonly sentinels: readonly HostPort[]; readonly name: string }
        | { readonly mode: 'cluster'; readonly nodes: readonly HostPort[] };
      readonly keyPrefix: string;
      readonly commandTimeoutMs: number;
      /** Replicas that must confirm a grant before it is answered (REDIS_MIN_REPLICA_ACKS); null = do not wait. */
      readonly replicaAcks: { readonly minReplicas: number; readonly timeoutMs: number } | null;
    }
  | { readonly kind: 'etcd'; readonly endpoints: readonly string[]; readonly keyPrefix: string; readonly commandTimeoutMs: number };

type RedisConnection = Extract<StoreConfig, { kind: 'redis' }>['connection'];

export interface Config {
  readonly nodeEnv: 'development' | 'production' | 'test';
  readonly port: number;
  readonly host: string;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Which request lines are written (see ACCESS_LOG). */
  readonly accessLog: AccessLogSettings;
  readonly store: StoreConfig;
  readonly limits: LeaseLimits;
  readonly fenceGraceMs: number;
  readonly shutdownTimeoutMs: number;
  readonly auth: { readonly mode: 'open' } | { readonly mode: 'keys'; readonly keysFile: string };
  readonly rateLimit: { readonly max: number; readonly windowMs: number };
  readonly httpTimeouts: HttpTimeouts;
  /** Fastify's trustProxy (see TRUST_PROXY). */
  readonly trustProxy: TrustProxy;
  /** Past it, new requests get 503 overloaded (see OVERLOAD_*). */
  readonly loadBudget: LoadBudget;
  /** What a new instance runs before /readyz answers 200 (see WARM_UP_*). */
  readonly warmUp: WarmUpSettings;
  /** Whether the OTEL_* variables ask for traces (see OTEL_TRACES_EXPORTER). */
  readonly tracing: boolean;
  /** HTTP_MAX_CONNECTIONS; undefined: derived from the open-file limit (see connection-budget.ts). */
  readonly maxConnections: number | undefined;
  /** Lease history (HISTORY_*); null when off. */
  readonly history: HistorySettings | null;
}

/** What lease history keeps (see domain/history.ts). */
export interface HistorySettings {
  readonly eventsPerKey: number;
  readonly keysPerNamespace: number;
  readonly retentionMs: number;
  readonly flushMs: number;
}

export interface HttpTimeouts {
  /** The whole request (headers and body) must arrive within this, or the connection is closed. */
  readonly requestTimeoutMs: number;
  /** The request headers must arrive within this: what stops a client that sends them a byte at a time. */
  readonly headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number;
  /** A socket with no traffic either way is closed after this (0: never); it must outlast the longest response. */
  readonly connectionTimeoutMs: number;
}

/** Thrown for invalid configuration; the message names every offending variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.') || '(env)'}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const connection: RedisConnection | undefined =
    e.REDIS_URL !== undefined
      ? { mode: 'standalone', url: e.REDIS_URL }
      : e.REDIS_SENTINELS !== undefined && e.REDIS_SENTINEL_NAME !== undefined
        ? { mode: 'sentinel', sentinels: e.REDIS_SENTINELS, name: e.REDIS_SENTINEL_NAME }
        : e.REDIS_CLUSTER_NODES !== undefined
          ? { mode: 'cluster', nodes: e.REDIS_CLUSTER_NODES }
          : undefined;
  const useRedis = e.KEYHOLDER_STORE === 'redis' || (e.KEYHOLDER_STORE === 'auto' && connection !== undefined);
  return Object.freeze({
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    accessLog: Object.freeze({
      mode: e.ACCESS_LOG,
      sampleEvery: e.ACCESS_LOG_SAMPLE_EVERY,
      summaryMs: e.ACCESS_LOG_SUMMARY_MS,
      slowMs: e.SLOW_REQUEST_MS,
    }),
    store:
      e.KEYHOLDER_STORE === 'etcd' && e.ETCD_ENDPOINTS !== undefined
        ? Object.freeze({
            kind: 'etcd' as const,
            endpoints: Object.freeze([...e.ETCD_ENDPOINTS]),
            keyPrefix: e.ETCD_KEY_PREFIX,
            commandTimeoutMs: e.ETCD_COMMAND_TIMEOUT_MS,
          })
        : useRedis && connection !== undefined
          ? Object.freeze({
              kind: 'redis' as const,
              connection: Object.freeze(connection),
              keyPrefix: e.REDIS_KEY_PREFIX,
              commandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
              replicaAcks:
                e.REDIS_MIN_REPLICA_ACKS > 0
                  ? Object.freeze({ minReplicas: e.REDIS_MIN_REPLICA_ACKS, timeoutMs: e.REDIS_REPLICA_ACK_TIMEOUT_MS })
                  : null,
            })
          : Object.freeze({ kind: 'memory' as const }),
    limits: Object.freeze({
      minTtlMs: e.LOCK_MIN_TTL_MS,
      maxTtlMs: e.LOCK_MAX_TTL_MS,
      maxWaitMs: e.LOCK_MAX_WAIT_MS,
      maxLockDelayMs: Math.min(e.LOCK_MAX_DELAY_MS, e.FENCE_GRACE_MS),
      maxWaitersPerKey: e.WAITERS_PER_KEY_MAX,
      maxWaitersPerInstance: e.WAITERS_PER_INSTANCE_MAX,
      maxWaitersPerNamespace: e.WAITERS_PER_NAMESPACE_MAX ?? namespaceShareOf(e.WAITERS_PER_INSTANCE_MAX),
      maxHeldLocksPerNamespace: e.NAMESPACE_MAX_HELD_LOCKS,
    }),
    fenceGraceMs: e.FENCE_GRACE_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    auth:
      e.KEYHOLDER_API_KEYS_FILE === undefined
        ? Object.freeze({ mode: 'open' as const })
        : Object.freeze({ mode: 'keys' as const, keysFile: e.KEYHOLDER_API_KEYS_FILE }),
    rateLimit: Object.freeze({ max: e.RATE_LIMIT_MAX, windowMs: e.RATE_LIMIT_WINDOW_MS }),
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    tracing: tracingWanted(
      e.OTEL_TRACES_EXPORTER,
      e.OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
      e.OTEL_SDK_DISABLED === 'true',
    ),
    loadBudget: Object.freeze({
      maxEventLoopDelayMs: e.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
      maxRequestsInFlight: e.OVERLOAD_MAX_REQUESTS_IN_FLIGHT,
      maxOpenWaits: e.OVERLOAD_MAX_OPEN_WAITS,
    }),
    warmUp: Object.freeze({ cycles: e.WARM_UP_CYCLES, maxMs: e.WARM_UP_MAX_MS }),
    maxConnections: e.HTTP_MAX_CONNECTIONS,
    history:
      e.HISTORY === 'on'
        ? Object.freeze({
            eventsPerKey: e.HISTORY_EVENTS_PER_KEY,
            keysPerNamespace: e.HISTORY_KEYS_PER_NAMESPACE,
            retentionMs: e.HISTORY_RETENTION_MS,
            flushMs: e.HISTORY_FLUSH_MS,
          })
        : null,
    httpTimeouts: Object.freeze({
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      connectionTimeoutMs: e.HTTP_CONNECTION_TIMEOUT_MS,
    }),
  });
}

/**
 * A tenth of the instance's waiting room per namespace by default: ten teams at their cap fill it,
 * so a single team at its cap leaves nine tenths to the others. At least 1.
 */
const NAMESPACE_SHARE_OF_WAITERS = 10;

function namespaceShareOf(instanceMax: number): number {
  return Math.max(1, Math.floor(instanceMax / NAMESPACE_SHARE_OF_WAITERS));
}

/**
 * Traces only when asked: an exporter other than `none`, or an OTLP endpoint (the traces-only one
 * counts too), and the SDK not disabled.
 */
function tracingWanted(exporters: string | undefined, endpoint: string | undefined, disabled: boolean): boolean {
  if (disabled) return false;
  if (exporters !== undefined)
    return !exporters
      .split(',')
      .map((x) => x.trim())
      .includes('none');
  return endpoint !== undefined && endpoint.trim() !== '';
}

/** What Fastify's trustProxy takes: yes/no, addresses/CIDRs, or a test by hop (0 = the socket's peer). */
export type TrustProxy = boolean | string | ((address: string, hop: number) => boolean);

function parseTrustProxy(value: string): TrustProxy {
  if (value === 'true') return true;
  if (value === 'false') return false;
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return (_address, hop) => hop < hops;
  }
  return value
    .split(',')
    .map((part) => part.trim())
    .join(',');
}

/**
 * The configuration of an empty environment: every value is the schema's default. Tests, tools and
 * buildApp use its parts (limits, HTTP timeouts) instead of writing the defaults a second time.
 */
export const DEFAULT_CONFIG: Config = loadConfig({});
export const DEFAULT_LIMITS: LeaseLimits = DEFAULT_CONFIG.limits;
export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = DEFAULT_CONFIG.httpTimeouts;
export const DEFAULT_ACCESS_LOG: AccessLogSettings = DEFAULT_CONFIG.accessLog;
