/**
 * Hand-written mutants: bugs planted one at a time in a copy of the source, each of which the safety
 * tests must catch. StrykerJS mutates the TypeScript mechanically; these cover what it cannot reach
 * (the Lua scripts) and the safety rules that live in module-level constants or one-line guards.
 *
 * Each `find` must occur exactly once in its file: when the code moves on and a `find` no longer
 * matches, the run fails loudly, so this list is kept in step with the code.
 */
export interface PlantedMutant {
  /** Short stable id, used in the report and with --only. */
  readonly id: string;
  /** Path from the repository root. */
  readonly file: string;
  readonly find: string;
  readonly replace: string;
  /** The bug, in words. */
  readonly what: string;
}

export const PLANTED_MUTANTS: readonly PlantedMutant[] = [
  {
    id: 'lock-set-grants-over-busy-keys',
    file: 'src/store/redis/scripts/lock-set-acquire.lua',
    find: 'if busy > 0 then\n  return {0, math.max(1, longest), busy - 1}\nend\n',
    replace: '',
    what: 'a lock set is granted although one of its keys is held (two holders of that key)',
  },
  {
    id: 'lock-delay-ignored-lua',
    file: 'src/store/redis/scripts/acquire.lua',
    find: 'local delayLeft = live and 0 or lockDelayLeft(cur)',
    replace: 'local delayLeft = 0',
    what: "an expired lease's lock-delay is ignored: the key is granted at once",
  },
  {
    id: 'memory-lock-set-partial',
    file: 'src/store/memory/memory-leases.ts',
    find: 'if (busyId !== undefined) return { acquired: false',
    replace: 'if (busyId !== undefined && ids.length < 0) return { acquired: false',
    what: 'embedded store: a lock set is granted although one of its keys is busy',
  },
  {
    id: 'release-no-owner-check',
    file: 'src/store/redis/scripts/release.lua',
    find: 'if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then',
    replace: 'if not isLive(cur[1], expiresAt) then',
    what: 'release frees the lock without checking the owner token',
  },
  {
    id: 'handover-to-dead-waiter',
    file: 'src/store/redis/scripts/_handover.lua',
    find: 'if ttl and waiterLive(raw) then',
    replace: 'if ttl then',
    what: 'a free lock is handed to a waiter whose instance died or whose wait ran out',
  },
  {
    id: 'handover-while-held',
    file: 'src/store/redis/scripts/_handover.lua',
    find: '  if isLive(cur[1], cur[2]) or lockDelayLeft(cur) > 0 then\n    return nil, cur\n  end\n',
    replace: '',
    what: 'the lock is handed to a waiter while it is still held',
  },
  {
    id: 'lease-end-from-second-clock',
    file: 'src/store/redis/scripts/_handover.lua',
    find: 'local expiresAt = nowMs + ttlMs',
    replace: 'local expiresAt = math.floor(nowMs / 1000) * 1000 + ttlMs',
    what: 'lease end computed from a clock truncated to the second (up to 1 s short)',
  },
  {
    id: 'renew-from-old-lease-end',
    file: 'src/store/redis/scripts/renew.lua',
    find: 'local newExpiresAt = nowMs + ttl',
    replace: 'local newExpiresAt = expiresAt + ttl',
    what: 'renew computes the new lease end from the old end instead of from now',
  },
  {
    id: 'renew-expired-lease',
    file: 'src/store/redis/scripts/renew.lua',
    find: 'if cur[1] ~= ARGV[1] or not isLive(cur[1], expiresAt) then',
    replace: 'if cur[1] ~= ARGV[1] then',
    what: 'renew accepts a lease that has already expired',
  },
  {
    id: 'quota-off-by-one',
    file: 'src/store/redis/scripts/_quota.lua',
    find: '  if n >= cap then',
    replace: '  if n > cap then',
    what: 'quota count off by one: a quota shard may count one unit over its cap (quota-slot calls and lock scripts)',
  },
  {
    id: 'quota-give-back-second-kept',
    file: 'src/store/redis/scripts/_quota.lua',
    find: "if call('HINCRBY', count, secondText, '-1') < 0 then",
    replace: "if call('HINCRBY', count, secondText, '0') < 0 then",
    what: "a unit given back stays counted in its second, so the sweep of that second takes it off the shard's count again: the shard admits more than its cap",
  },
  {
    id: 'lease-without-unit-unmarked',
    file: 'src/store/redis/scripts/acquire.lua',
    find: 'graceMs, ARGV[8], maxQuotaSlots < 0 and 0 or nil)',
    replace: 'graceMs, ARGV[8], nil)',
    what: "a lease whose quota is counted through the quota-slot calls gives back a unit of the lock scripts it never took (another lease's): the namespace admits more than its cap",
  },
  {
    id: 'slot-named-by-token-alone',
    file: 'src/domain/quota.ts',
    find: 'return `${ownerToken}/${id}`;',
    replace: 'return ownerToken;',
    what: "a lease's quota slot named by its owner token alone: a release of a key the token does not hold frees the slot of the lease it holds, which stays held uncounted (the namespace goes over its cap)",
  },
  {
    id: 'slot-extend-noop',
    file: 'src/store/redis/scripts/quota-extend.lua',
    find: "local counted = known and quotaGive(KEYS[1], known)\nquotaAdd(KEYS[1], KEYS[2], second)\nredis.call('ZADD', KEYS[2], second, member)\n",
    replace: 'local counted = known\n',
    what: 'renew does not extend the quota slot (Redis)',
  },
  {
    id: 'slot-missing-not-recounted',
    file: 'src/store/memory/memory-store.ts',
    find: 'if (endMs === undefined || expiresAtMs > endMs) slots.set(quotaSlotId, expiresAtMs);',
    replace: 'if (endMs !== undefined && expiresAtMs > endMs) slots.set(quotaSlotId, expiresAtMs);',
    what: 'a renewed lease whose slot went missing (a failed release freed it) stays uncounted: the namespace holds more than its cap',
  },
  {
    id: 'set-key-renew-slot-left',
    file: 'src/store/redis/scripts/renew.lua',
    find: 'local renewed = from ~= 0 and 1 or 2',
    replace: 'local renewed = 1',
    what: "under a cap counted inside the lock scripts, a lock set's key renewed alone leaves its quota slot at the set's end: the lease lives on uncounted (Redis)",
  },
  {
    id: 'uncertain-acquire-frees-slot',
    file: 'src/domain/quota.ts',
    find: 'return isDomainError(error) && (error.leaseKept || (error instanceof StoreUnavailableError && error.outcomeUnknown));',
    replace: 'return isDomainError(error) && error.leaseKept;',
    what: 'an acquire whose answer was lost but which ran in the store frees its quota slot: the lease it was granted lives on uncounted, over the cap',
  },
  {
    id: 'abort-answered-before-give-back',
    file: 'src/store/shared/wait-room.ts',
    find: '    this.giveBackHanded(waiter).then(\n      () => this.finish(waiter, () => waiter.reject(reason)),',
    replace: '    this.finish(waiter, () => waiter.reject(reason));\n    this.giveBackHanded(waiter).then(\n      () => undefined,',
    what: 'a waiter that leaves as the lock is handed to it is answered before that lease is given back: its quota slot goes back while the lease lives (the namespace over its cap)',
  },
  {
    id: 'late-keyed-grant-given-back',
    file: 'src/domain/lease-service.ts',
    find: 'return lane.freshness.refuseIfLate(lease, request.idempotencyKey === undefined ? undefined : KEEP_FOR_KEY);',
    replace: 'return lane.freshness.refuseIfLate(lease, undefined);',
    what: 'a late grant asked with an Idempotency-Key is given back, though a retry may already hold it as its replay: another caller is granted the lock while that 200 still runs',
  },
  {
    id: 'permit-release-of-ended-record',
    file: 'src/store/redis/scripts/permit-release.lua',
    find: 'if not weight or expiresAt <= nowMs then',
    replace: 'if not weight then',
    what: 'a late release of a permit lease that ended, its record left in the pool hash after its lease ends expired, takes its weight off the live leases: a second permit of a limit of 1 is granted (Redis)',
  },
  {
    id: 'dead-waiter-unit-kept',
    file: 'src/store/redis/scripts/_handover.lua',
    find: 'if not keys[5] or not raw then',
    replace: 'if true then',
    what: 'a lock waiter dropped from the queue (its wait ran out before its cancel arrived) keeps the quota unit it took: the namespace is refused below its cap for a wait + lease with nothing held (Redis)',
  },
  {
    id: 'late-write-slot-kept',
    file: 'src/domain/lease-service.ts',
    find: 'lane.quota.free(namespace, ownerToken, id),',
    replace: 'Promise.resolve(),',
    what: "a grant refused and given back as its answer left keeps its quota slot to the lease's end: the namespace is refused below its cap (every primitive, embedded store)",
  },
  {
    id: 'keyed-grant-rolled-back-unacknowledged',
    file: 'src/store/redis/redis-store.ts',
    find: "const rollBack = () => (what === 'grant' ? giveBack() : Promise.resolve(false));",
    replace: "const rollBack = () => (what !== 'renewal' ? giveBack() : Promise.resolve(false));",
    what: 'with replica acks, a grant asked with an Idempotency-Key that no replica confirmed is rolled back, though a retry may hold it as its replay: another caller is granted the lock while that 200 runs (Redis)',
  },
  {
    id: 'late-set-grant-written',
    file: 'src/http/routes/lock-sets.ts',
    find: '        ownerToken: grant.ownerToken,\n        ttlMs,\n        decidedAt: grant.decidedAt,\n',
    replace: '        ownerToken: grant.ownerToken,\n        ttlMs,\n        decidedAt: Infinity,\n',
    what: "a lock set's grant that went stale after the service answered is written as a 200 for leases that have ended",
  },
  {
    id: 'acquire-quota-off-by-one',
    file: 'src/store/redis/scripts/acquire.lua',
    find: 'local full = maxQuotaSlots > 0 and quotaTake(KEYS[4], KEYS[5], nowMs + ttlMs, maxQuotaSlots)',
    replace: 'local full = maxQuotaSlots > 0 and quotaTake(KEYS[4], KEYS[5], nowMs + ttlMs, maxQuotaSlots + 1)',
    what: 'quota inside acquire: a namespace may hold one lock over its cap (Redis)',
  },
  {
    id: 'acquire-no-slot-when-waiting',
    file: 'src/store/redis/scripts/acquire.lua',
    find: 'local full = maxQuotaSlots > 0 and quotaTake(KEYS[4], KEYS[5], nowMs + waitMs + ttlMs, maxQuotaSlots)',
    replace: 'local full = nil',
    what: 'quota inside acquire: a caller that waits takes no slot (Redis)',
  },
  {
    id: 'renew-no-slot-move',
    file: 'src/store/redis/scripts/renew.lua',
    find: 'quotaMove(KEYS[2], KEYS[3], from, to)',
    replace: '',
    what: 'renew does not move the quota slot along with the lease (Redis, inside renew)',
  },
  {
    id: 'clock-floor-ms',
    file: 'src/store/redis/scripts/_handover.lua',
    find: 'local token = max((cur[3] or 0) + 1, nowUs)',
    replace: 'local token = max((cur[3] or 0) + 1, nowMs)',
    what: 'fencing clock floor in milliseconds instead of microseconds (Redis)',
  },
  {
    id: 'fencing-clock-only-lua',
    file: 'src/store/redis/scripts/_handover.lua',
    find: 'local token = max((cur[3] or 0) + 1, nowUs)',
    replace: 'local token = nowUs',
    what: 'fencing token from the clock only, without "last + 1" (Redis)',
  },
  {
    id: 'fencing-clock-only-ts',
    file: 'src/domain/fencing.ts',
    find: 'return Math.max(lastToken + 1, Math.floor(nowMs * 1000));',
    replace: 'return Math.floor(nowMs * 1000);',
    what: 'fencing token from the clock only, without "last + 1" (embedded store)',
  },
  {
    id: 'reply-nonce-unchecked',
    file: 'src/store/redis/replies.ts',
    find: 'if (reply[0] !== nonce) throw new MisalignedReplyError(script);',
    replace: '',
    what: "reply-nonce check removed: a call may take another call's reply as its own",
  },
  {
    id: 'late-grant-guard-off',
    file: 'src/domain/freshness.ts',
    find: 'return performance.now() - lease.decidedAt < lease.ttlMs * LATE_REPLY_FRACTION;',
    replace: 'return true;',
    what: 'late-grant guard off: a reply that came back too late is handed out',
  },
  {
    id: 'no-slot-when-waiting',
    file: 'src/domain/lease-service.ts',
    find: ': lane.quota.grantWaiting(request, waitMs, () => this.acquireWaiting(lane, request, refusals, waited));',
    replace: ': this.acquireWaiting(lane, request, refusals, waited);',
    what: 'no quota slot taken when waitMs > 0 (quota bypass; every primitive)',
  },
  {
    id: 'renew-no-slot-extend',
    file: 'src/domain/lease-rules.ts',
    find: 'await this.parts.quota.extend(namespace, ownerToken, id, outcome.expiresAtMs);',
    replace: '',
    what: 'renew does not extend the quota slot (locks, semaphores and read/write locks)',
  },
  {
    id: 'waiter-left-lease-kept',
    file: 'src/domain/lease-rules.ts',
    find: 'giveBackForCallerGone(this.parts.giveBack(id, ownerToken),',
    replace: 'giveBackForCallerGone(Promise.resolve(false),',
    what: 'lease not given back when the waiting caller left as it was granted (every primitive)',
  },
  {
    id: 'waiter-left-lease-kept-redis',
    file: 'src/store/shared/wait-room.ts',
    find: 'if (reply.held) await this.ops.release(waiter.key, waiter.ownerToken);',
    replace: '',
    what: 'Redis wait room: a lease handed to a caller that left is not given back',
  },
  {
    id: 'memory-handover-while-held',
    file: 'src/store/memory/memory-leases.ts',
    find: 'head !== undefined && used(pool) + head.weight <= pool.capacity;',
    replace: 'head !== undefined;',
    what: 'embedded store: a key is handed to a waiter while it is still held (no room left)',
  },
  {
    id: 'memory-clock-floor-ms',
    file: 'src/domain/fencing.ts',
    find: 'Math.floor(nowMs * 1000)',
    replace: 'Math.floor(nowMs)',
    what: 'fencing clock floor in milliseconds instead of microseconds (embedded store)',
  },
];

/**
 * The five bugs `npm test` used to miss (see docs/testing.md), each with the one test that must fail on
 * it. `npm run test:mutants` plants each and runs that test alone (vitest -t), so the report shows the
 * named test failing on the named bug, not some other test that happened to fail on a busy machine.
 * The same test is first run on the unchanged code, where it must pass.
 */
export interface FocusedProof {
  /** The bug, in the words of the table in docs/testing.md. */
  readonly bug: string;
  /** Ids from PLANTED_MUTANTS. */
  readonly mutants: readonly string[];
  readonly testFile: string;
  /** The test's full name as vitest prints it (describe > it), matched exactly. */
  readonly testName: string;
}

export const FOCUSED_PROOFS: readonly FocusedProof[] = [
  {
    bug: 'late-grant guard turned off',
    mutants: ['late-grant-guard-off'],
    testFile: 'test/redis/late-reply.test.ts',
    testName:
      'a store reply that arrives past half the lease acquire: 503 store_unavailable, nothing granted, and the lease is given back in Redis at once',
  },
  {
    bug: 'fencing token from the clock only, without "last + 1" (embedded store)',
    mutants: ['fencing-clock-only-ts'],
    testFile: 'test/unit/memory-store-clock.test.ts',
    testName: 'embedded store on a fake clock a frozen clock: each grant inside the same microsecond is numbered last + 1',
  },
  {
    bug: 'fencing token from the clock only, without "last + 1" (Redis)',
    mutants: ['fencing-clock-only-lua'],
    testFile: 'test/redis/scripts.test.ts',
    testName: 'acquire.lua the fencing token is last + 1 when the last one is ahead of the clock',
  },
  {
    bug: 'no quota slot taken when waitMs > 0',
    mutants: ['no-slot-when-waiting'],
    testFile: 'test/domain/lock-service.test.ts',
    testName:
      "lock service over 'embedded (memory)' quota: a caller that waits takes a slot, so nobody else in its namespace gets past the cap",
  },
  {
    bug: 'renew does not extend the quota slot',
    mutants: ['renew-no-slot-extend'],
    testFile: 'test/domain/lock-service.test.ts',
    testName: "lock service over 'embedded (memory)' quota: a renewed lease still counts after the end of the slot its grant reserved",
  },
  {
    bug: 'no quota slot taken when waitMs > 0 (Redis, inside acquire)',
    mutants: ['acquire-no-slot-when-waiting'],
    // The lock scripts count the quota only at a limit of 9,600 or more (QUOTA_INSIDE_FROM); the lock
    // service's Redis tests use small limits (the quota-slot calls), so the proof is the scripts' own test.
    testFile: 'test/redis/scripts.test.ts',
    testName:
      'the namespace quota, counted per shard inside the lock scripts (_quota.lua) {5, retryAfterMs}: the shard counts its cap; a release gives the unit back in the same step; a waiter takes one and a cancel gives it back',
  },
  {
    bug: 'renew does not extend the quota slot (Redis, inside renew)',
    mutants: ['renew-no-slot-move'],
    testFile: 'test/redis/scripts.test.ts',
    testName:
      'the namespace quota, counted per shard inside the lock scripts (_quota.lua) a waiter granted by a hand-over keeps its unit (field b) until it releases; a renew moves a unit to the new end',
  },
  {
    bug: 'lease not given back when the waiting caller has left',
    mutants: ['waiter-left-lease-kept'],
    testFile: 'test/domain/lock-service.test.ts',
    testName:
      "lock service over 'embedded (memory)' a waiter that leaves as the lock is handed to it gives the lease back at once; the next waiter gets it",
  },
  {
    bug: 'lease not given back when the waiting caller has left (Redis wait room)',
    mutants: ['waiter-left-lease-kept-redis'],
    testFile: 'test/domain/lock-service.test.ts',
    testName:
      "lock service over 'redis' a waiter that leaves as the lock is handed to it gives the lease back at once; the next waiter gets it",
  },
];
