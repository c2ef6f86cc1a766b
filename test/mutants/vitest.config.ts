import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
// One test worker per StrykerJS runner for all its mutants, not one per mutant (see keep-worker.ts).
if (process.env.KEEP_WORKER !== '0') await import('./keep-worker.js');

/**
 * The tests StrykerJS runs against each mutant of src/domain and src/store: only files that drive the
 * store and the lock service in this process (a mutant is switched on inside the test process, so
 * tests that spawn keyholder processes could never see it), chosen per part of the scope
 * (STRYKER_PART, see stryker.config.mjs), fastest first.
 *
 * A file that builds the whole HTTP app (test/http/*, test/redis/late-reply.test.ts) costs seconds
 * per mutant that reaches it (Fastify and its plugins, set up again for every run), before any test
 * runs; the test worker itself is kept from run to run (keep-worker.ts). Those files are therefore left out: the rules they
 * check are checked in-process by the unit, lock-service and contract tests below, and the planted
 * mutants run them (test/mutants/run.ts). Also left out: the differential tests (one 19 s test that
 * reaches nearly every line of both stores) and the Sentinel contract (the same RedisStore code as the
 * plain Redis contract). The etcd contract runs in the etcd part only (a real cluster per runner).
 *
 * The embedded store's contract runs on a compressed fake clock here (memory-store-fast-clock.ts): the
 * same contract, about four times faster. test/conformance/memory-store.test.ts runs it on the real
 * clock in `npm test`.
 *
 * Fastest first: StrykerJS stops a mutant's run at its first failing test, so a mutant the unit tests
 * kill never waits on the slower contract tests (vitest's own order runs the longest first).
 */
const PART_FILES: Record<string, readonly string[]> = {
  // The domain is backend-agnostic: its services over the embedded store in this process (test/domain),
  // the lock service also over Redis, and the embedded store's contract exercise it; the Redis contract
  // adds nothing of the domain's but 15 s per survivor, and the HTTP files as many seconds per mutant.
  domain: [
    'test/unit/safety-core.test.ts',
    'test/unit/own-lag.test.ts',
    'test/unit/wait-gate.test.ts',
    'test/unit/freshness.test.ts',
    'test/unit/idempotency.test.ts',
    'test/unit/error-codes-sent.test.ts',
    'test/unit/random.test.ts',
    'test/unit/primitive-refusal.test.ts',
    'test/unit/history-encoding.test.ts',
    'test/unit/history.test.ts',
    'test/unit/history-reads.test.ts',
    'test/unit/history-lines.test.ts',
    'test/unit/history-timeline.test.ts',
    'test/unit/history-recorder.test.ts',
    'test/unit/history-handed-facts.test.ts',
    'test/unit/history-same-ms.test.ts',
    'test/unit/watch-on-change.test.ts',
    'test/unit/memory-store-clock.test.ts',
    'test/unit/memory-store-rules.test.ts',
    'test/domain/quota-inside-store.test.ts',
    'test/domain/late-answers.test.ts',
    'test/domain/lease-service-reports.test.ts',
    'test/domain/lock-set-abort.test.ts',
    'test/domain/lock-set-abort-give-back.test.ts',
    'test/domain/watch-upkeep.test.ts',
    'test/domain/watch.test.ts',
    'test/domain/permits.test.ts',
    'test/domain/lock-sets.test.ts',
    'test/domain/lock-set-delay-wait.test.ts',
    'test/domain/lock-service-answers.test.ts',
    'test/domain/lease-service-calls.test.ts',
    'test/domain/quota-renew-force-release.test.ts',
    'test/domain/release-requests.test.ts',
    'test/domain/permit-answers.test.ts',
    'test/domain/lock-service.test.ts',
    'test/mutants/memory-store-fast-clock.ts',
  ],
  memory: [
    'test/unit/safety-core.test.ts',
    'test/unit/memory-store-clock.test.ts',
    'test/unit/wall-clock.test.ts',
    'test/unit/memory-store-rules.test.ts',
    'test/unit/memory-permits-rules.test.ts',
    'test/unit/store-queue-shed.test.ts',
    'test/unit/memory-permits-shown.test.ts',
    'test/unit/memory-leases-timing.test.ts',
    'test/unit/memory-leases-queue.test.ts',
    'test/unit/memory-quota-retire.test.ts',
    'test/unit/lease-port.test.ts',
    'test/redis/shared-rate-limit.test.ts',
    'test/unit/create-history.test.ts',
    'test/unit/create-history-redis.test.ts',
    'test/unit/memory-history.test.ts',
    'test/unit/memory-history-trim.test.ts',
    'test/mutants/memory-history-contract.ts',
    'test/domain/lock-service-answers.test.ts',
    'test/domain/permit-answers.test.ts',
    'test/domain/lock-service.test.ts',
    'test/mutants/memory-store-fast-clock.ts',
  ],
  redis: [
    'test/unit/safety-core.test.ts',
    'test/unit/redis-keys.test.ts',
    'test/unit/cluster-slot.test.ts',
    'test/unit/redis-keys-bounds.test.ts',
    'test/unit/redis-replies.test.ts',
    'test/unit/redis-replies-strict.test.ts',
    'test/unit/redis-client-options.test.ts',
    'test/unit/watch-marks.test.ts',
    'test/unit/watch-marks-passes.test.ts',
    'test/unit/lua-source.test.ts',
    'test/unit/function-library.test.ts',
    'test/unit/cluster-script-commands.test.ts',
    'test/unit/command-text.test.ts',
    'test/unit/script-lane.test.ts',
    'test/unit/contended-keys.test.ts',
    'test/unit/wait-room-timing.test.ts',
    'test/unit/deadline-queue.test.ts',
    'test/redis/client-events.test.ts',
    'test/redis/command-deadline.test.ts',
    'test/redis/scripts.test.ts',
    'test/redis/script-commands.test.ts',
    'test/redis/function-loads.test.ts',
    'test/redis/store-state.test.ts',
    'test/redis/wait-room.test.ts',
    'test/redis/history-batches.test.ts',
    'test/redis/engine-edges.test.ts',
    'test/redis/store-wiring.test.ts',
    'test/redis/store-calls.test.ts',
    'test/redis/permits-paths.test.ts',
    'test/redis/migrate-layout.test.ts',
    'test/redis/upgrade-layout.test.ts',
    'test/redis/close-while-down.test.ts',
    'test/redis/store-connect-logs.test.ts',
    'test/redis/permit-scripts.test.ts',
    'test/redis/quota-force-release-inside.test.ts',
    'test/redis/quota-set-key-renew.test.ts',
    'test/redis/quota-one-key-set.test.ts',
    'test/redis/quota-bound.test.ts',
    'test/redis/quota-dead-waiter.test.ts',
    'test/redis/quota-uncertain-acquire.test.ts',
    'test/redis/quota-abort-handover.test.ts',
    'test/redis/permit-stale-release.test.ts',
    'test/redis/replica-acks-idempotency.test.ts',
    'test/redis/store-outage.test.ts',
    'test/domain/lock-service.test.ts',
    'test/conformance/redis-store.test.ts',
    'test/faults/reply-drop.test.ts',
    // Starts a primary and its replica of its own (some 2 s): last, so only a mutant every file above misses pays for it.
    'test/redis/replica-acks.test.ts',
    // Each starts Sentinels or a Cluster of its own (about 3 s): the connection code only they reach (a
    // Sentinel's switch of another master, the Cluster's subscriber), last for the same reason.
    'test/redis/sentinel-switches.test.ts',
    'test/redis/cluster-subscriber.test.ts',
    // Starts a 3-master Cluster of its own (seconds): the master gate's rules (nodes.ts), which only a
    // Cluster reaches; last, for the same reason.
    'test/redis/cluster-gate.test.ts',
  ],
  // The etcd store against a real cluster, shared by the files that only talk to it (shared-etcd.ts); the
  // files that stop or kill members (unreachable, member-down) start their own and are left to npm test.
  etcd: [
    'test/unit/wall-clock.test.ts',
    'test/unit/etcd-keys.test.ts',
    'test/unit/etcd-records.test.ts',
    'test/unit/etcd-pools.test.ts',
    'test/etcd/hand-over-watches.test.ts',
    'test/etcd/history-writes.test.ts',
    'test/etcd/old-layout.test.ts',
    'test/etcd/lost-reply.test.ts',
    'test/etcd/session-lost.test.ts',
    'test/etcd/quota-burst.test.ts',
    'test/etcd/semaphore-burst.test.ts',
    'test/etcd/leases-hand-over.test.ts',
    'test/etcd/leases-grants.test.ts',
    'test/etcd/leases-contention.test.ts',
    'test/etcd/leases-visits.test.ts',
    'test/etcd/store-quota.test.ts',
    'test/etcd/store-sweep.test.ts',
    'test/etcd/store-plumbing.test.ts',
    'test/conformance/etcd-store.test.ts',
  ],
};
// The replies, keys, scripts and client code are reached by the same files (the store's tests reach the
// client code).
PART_FILES['redis-codec'] = [...(PART_FILES.redis ?? [])];
const part = process.env.STRYKER_PART;
/** Without a part (a plain `stryker run` over the whole scope): every file, in the parts' order. */
const ALL = part ? (PART_FILES[part] ?? []) : [...new Set(Object.values(PART_FILES).flat())];
/**
 * STRYKER_TEST_FILES (comma-separated): these files only, for a run aimed at a few mutants
 * (`mutate: ['file.ts:from-to']`) and the tests written against them; never in a reported run.
 */
const chosen = (process.env.STRYKER_TEST_FILES ?? '').split(',').filter((f) => f !== '');
const FILES = chosen.length > 0 ? chosen : ALL;

class FastestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => FILES.indexOf(relative(spec.project.config.root, spec.moduleId));
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: [...FILES],
    // The Redis part's files that only talk to their server share one per runner (RedisServer.startShared).
    globalSetup: part?.startsWith('redis') ? ['test/mutants/shared-redis.ts'] : part === 'etcd' ? ['test/mutants/shared-etcd.ts'] : [],
    sequence: { sequencer: FastestFirst },
    // StrykerJS switches mutants on at run time (static mutants are ignored), so the files need no fresh
    // module cache each: sharing one saves re-importing Fastify and ioredis for every file of every run.
    // (A plain `vitest run` with this config then does not exit by itself; StrykerJS keeps it running.)
    isolate: false,
    // A mutant that makes a wait hang fails its test here (killed), before StrykerJS's own timeout
    // (stryker.config.mjs timeoutMS) has to kill and restart the whole runner. The slowest test here
    // takes about 4 s at a load average of 15 on 2 cores.
    testTimeout: 15_000,
    hookTimeout: 30_000,
  },
});
