/** Messages between the benchmark runner and its load-generating worker process. */

export type LoopScenario =
  | 'pairs'
  | 'semaphore'
  | 'hot'
  | 'renew'
  | 'floor-http'
  | 'floor-lock'
  | 'floor-redis'
  | 'peer-etcd'
  | 'peer-live-mutex'
  | 'peer-redis-semaphore';

export interface LoopTask {
  readonly kind: 'loop';
  readonly scenario: LoopScenario;
  /**
   * Base URL of the HTTP target (keyholder, the floor or etcd); the Redis URL for floor-redis and
   * peer-redis-semaphore; tcp://host:port of the broker for peer-live-mutex.
   */
  readonly target: string;
  readonly concurrency: number;
  readonly warmMs: number;
  readonly durationMs: number;
  /** Distinguishes the keys of one run from another's (renew and hot key start from fresh locks). */
  readonly tag: string;
  /** Processes whose CPU time is read at the start and end of the measured window. */
  readonly serverPid?: number;
  readonly redisPid?: number;
  /** When set, INFO commandstats is read at the start and end of the measured window (see LoopResult.redisCommands). */
  readonly redisUrl?: string;
}

export interface MemoryTask {
  readonly kind: 'memory';
  readonly keyholderUrl: string;
  readonly redisUrl: string;
  readonly keyPrefix: string;
  readonly locks: number;
  readonly fenceGraceMs: number;
}

export interface ChainTask {
  readonly kind: 'chain';
  readonly keyholderUrl: string;
  readonly redisUrl: string;
  readonly waiters: number;
  /** How many times the whole chain (holder + waiters) is run; figures are summed over them. */
  readonly cycles: number;
  readonly tag: string;
}

export interface ExpiryTask {
  readonly kind: 'expiry';
  readonly keyholderUrl: string;
  readonly repeats: number;
  readonly ttlMs: number;
  readonly tag: string;
}

/** Blocking queries: `watchers` GETs with ?index&waitMs on one key, woken by `changes` grants and releases. */
export interface WatchTask {
  readonly kind: 'watch';
  readonly keyholderUrl: string;
  readonly redisUrl: string;
  readonly watchers: number;
  readonly changes: number;
  readonly tag: string;
}

export type Task = LoopTask | MemoryTask | ChainTask | ExpiryTask | WatchTask;

/** load-worker.ts to each watch client (watch-client.ts): open sockets, send one blocking query on each, report. */
export type WatchClientMessage =
  | { readonly kind: 'open'; readonly port: number; readonly watchers: number }
  | { readonly kind: 'ask'; readonly request: string }
  | { readonly kind: 'collect'; readonly oldIndex: number }
  | { readonly kind: 'close' };

export type WatchClientReport =
  | { readonly kind: 'opened' }
  | { readonly kind: 'asked' }
  /** `at`: when each answer's first bytes arrived (Unix ms, fractional); `index`: the new index seen. */
  | { readonly kind: 'answers'; readonly at: number[]; readonly failures: number; readonly index: number };

/** Latency percentiles in milliseconds. */
export interface Percentiles {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
}

export interface LoopResult {
  /** Completed units (a pair, a hand-off, a renew, a request) in the measured window. */
  readonly units: number;
  readonly seconds: number;
  readonly unitsPerSecond: number;
  readonly latency: Record<string, Percentiles>;
  /** Answers other than the expected success, by operation and status. */
  readonly errors: Record<string, number>;
  /**
   * CPU of the process that does the locking work: the server's, or for an in-process library
   * (peer-redis-semaphore) the load process's own, since that is where the library runs.
   */
  readonly serverCpuSeconds?: number;
  readonly redisCpuSeconds?: number;
  /** Read and write system calls of the server's and Redis's process in the measured window (see ioCalls). */
  readonly serverIoCalls?: number;
  readonly redisIoCalls?: number;
  /**
   * Calls per Redis command in the measured window (INFO commandstats deltas, the reads themselves
   * left out). Commands a script runs are counted under their own names, the script under evalsha (or fcall: the lock pair's functions).
   */
  readonly redisCommands?: Record<string, number>;
  /** Hot key only: next waiter's 200 after the release was sent / after the release was answered. */
  readonly handOffFromReleaseSent?: Percentiles;
  readonly handOffFromReleaseAnswered?: Percentiles;
  /** Hot key only: hand-offs whose grant reached the client before the release's own answer. */
  readonly grantsBeforeReleaseAnswer?: number;
}

export interface MemoryResult {
  readonly locks: number;
  readonly baselineBytes: number;
  readonly heldBytes: number;
  /** Right after release: the keys still hold the last fencing token until FENCE_GRACE_MS runs out. */
  readonly releasedBytes: number;
  readonly keysAfterRelease: number;
  readonly afterGraceBytes: number;
  readonly keysAfterGrace: number;
  readonly msUntilGone: number;
  /** MEMORY USAGE of one held lock's record (Redis's own estimate: key, value and its entry in the key table). */
  readonly memoryUsageOfOneLock: number;
  /** That record's length (STRLEN) and OBJECT ENCODING. */
  readonly recordBytesOfOneLock: number;
  readonly encodingOfOneLock: string;
  /** MEMORY STATS fields that moved, per lock: [held - baseline, after the grace - baseline]. */
  readonly statsDeltaPerLock: Record<string, [number, number]>;
}

export interface ChainResult {
  readonly waiters: number;
  /** Acquires answered 503 overloaded while the queue was filled (sent at once), retried after Retry-After. */
  readonly overloadedRetries?: number;
  readonly handOffs: number;
  readonly failures: number;
  readonly seconds: number;
  /** Every Redis command executed (those run inside scripts included), per hand-off. */
  readonly commandsPerHandOff: number;
  /** Commands sent by clients (script calls, PUBLISH excluded as it runs inside scripts), per hand-off. */
  readonly scriptCallsPerHandOff: number;
  readonly commandBreakdown: Record<string, number>;
  readonly handOffFromReleaseAnswered: Percentiles;
  readonly handOffFromReleaseSent: Percentiles;
}

export interface ExpiryResult {
  readonly samples: number[];
  readonly failures: number;
}

export interface WatchResult {
  readonly watchers: number;
  readonly changes: number;
  /** Processes the watchers were spread over (watch-client.ts). */
  readonly clients: number;
  /** Watcher answers that were not the new state (errors, time-outs). */
  readonly failures: number;
  /** From the changing call being sent to the first bytes of each watcher's answer arriving. */
  readonly wake: Percentiles;
  /** Each measured change's own p99 over its watchers, in order (the pooled `wake` mixes the changes). */
  readonly perChangeP99?: readonly number[];
  /** Every Redis command executed per change (scripts' inner commands included), and the breakdown. */
  readonly commandsPerChange: number;
  readonly commandBreakdown: Record<string, number>;
}

export type TaskResult = LoopResult | MemoryResult | ChainResult | ExpiryResult | WatchResult;

export type WorkerMessage = { readonly ok: true; readonly result: TaskResult } | { readonly ok: false; readonly error: string };
