--[[
acquire: grant the lock if it is free and nobody is queued; otherwise queue the caller (when it
waits) or refuse.

Lock record (one string key per lock, its fields packed: _lock.lua; the key expires at lease end +
grace, so an idle lock leaves nothing):
  o = owner token of the live lease (absent when free)
  e = lease end, Unix ms on the Redis clock (absent when free)
  h = holder label (optional)
  i = idempotency key the live lease was granted with (optional)
  t = last fencing token issued for this lock
  q = until when the lock's wait queue may exist, Unix ms (absent: nobody was queued); without it no
      script looks at the queue
  w = until when an instance watches the lock, Unix ms (watch-mark.lua); change notices only then
  d = the lock-delay of a lease (_delay.lua)
  b = the second of a handed-over lease's quota unit (_lock.lua unitSecond); 0: the lease took no unit
      here (its quota is counted around the lock scripts)
  r = a release request on the live lease, "atMs|payload" (request-release.lua); dropped with the lease
The record lives until its lease's end plus the grace, or longer while q or w need it (writeLock,
_lock.lua).

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the count of the lock's quota shard (HASH; same hash tag as the lock, so the same Cluster slot;
         see _quota.lua)
KEYS[5]  the ends of the lock's quota shard (ZSET; see _quota.lua)
ARGV[1]  owner token of the new lease
ARGV[2]  lease length, ms (integer > 0)
ARGV[3]  holder label, "" for none
ARGV[4]  fencing grace, ms: how long the record outlives the lease
ARGV[5]  the waiting, in one argument (read only when the lock is not granted at once, so a plain
         acquire does not pay four more arguments): "waitMs|maxWaiters|livenessMs|waiterId|instanceId"
           waitMs      wait, ms: 0 = do not wait
           maxWaiters  most waiters allowed on this lock
           livenessMs  waiter liveness, ms: a queued waiter is dropped if its instance stops refreshing
                       it this long
           waiterId    waiter id (unique; used when queued)
           instanceId  instance id of the caller's keyholder (its grant channel)
ARGV[6]  grant channel prefix
ARGV[7]  lock name (for the hand-over message)
ARGV[8]  idempotency key, "" for none: "<scope>:<fingerprint>" (src/domain/idempotency.ts), stored with a
         lease this call grants; if the live lease was granted with the same one, that lease is the answer;
         if with the same scope but another fingerprint (the key reused for another request), {6}
ARGV[9]  most quota units (leases held or waited for) the lock's quota shard may count at once: the
         namespace's limit over the shards, rounded up; 0 = no quota; -1 = the quota is counted around
         the lock scripts (the quota-slot calls): no unit is taken here, and the lease (field b = 0) or the
         waiter says so, so that nothing of it is given back or moved here
ARGV[10] lock-delay, ms (0 = none): how long the lock stays unavailable if this lease expires (_delay.lua)
ARGV[11] ARGV[1]'s 16 bytes as 32 hex digits, "" for a token kept as given (knowOwner, _lock.lua)

Returns:
  {1, fencingToken, expiresAtMs}   granted to the caller
  {0, retryAfterMs}                held (or others are queued) and the caller does not wait
  {2, retryAfterMs}                held and the queue already holds maxWaiters (ARGV[5]) live waiters
  {3, retryAfterMs}                queued; the grant will come as a hand-over message
  {4, fencingToken, expiresAtMs, ownerToken, holder}
                                   the live lease was granted with this idempotency key: that lease
                                   (holder "" for none); its record's TTL set again, unchanged
  {5, retryAfterMs}                the quota shard counts ARGV[9] units; retryAfterMs = until its earliest
                                   counted second ends (>= 1); nothing changed
  {6}                              the live lease was granted with this idempotency key's scope but for
                                   another request (ttlMs, holder or lock-delay); nothing changed

A grant or a queued wait takes a quota unit in the same step, counted to the lease's end (for a
waiter, the end of its wait plus its lease; a waiter granted by a hand-over keeps that unit, and its
lease records the unit's second in field b). Release, force-release and cancel give it back; renew
moves it to the lease's new end.
]]
--- @include "_handover"
--- @include "_quota"

knowOwner(ARGV[1], ARGV[11])
local graceMs = ARGV[4] + 0
local ttlMs = ARGV[2] + 0
local maxQuotaSlots = ARGV[9] + 0
local cur = readLock(KEYS[1])
local expiresAt = cur[2]
local live = isLive(cur[1], expiresAt)
local delayLeft = live and 0 or lockDelayLeft(cur)
-- A lease that ran out with callers queued belongs to the first of them, not to this newcomer. The
-- queue is only looked at when the lock is free and its record says someone was queued (q).
if not live and delayLeft == 0 and handOverFree(KEYS, cur, graceMs, ARGV[6], ARGV[7]) then
  expiresAt = cur[2]
  live = true
end
if not live and delayLeft == 0 then
  -- Free, and nobody live is queued. A quota unit counted to the lease's end, unless the shard is full:
  -- then the time until its earliest counted second ends. (Written out here and below, not a helper: in
  -- the function library a helper inside a script's body is a closure made on each call.)
  local full = maxQuotaSlots > 0 and quotaTake(KEYS[4], KEYS[5], nowMs + ttlMs, maxQuotaSlots)
  if full then
    return {5, full}
  end
  -- Field b = 0: this lease took no unit here (see ARGV[9]).
  local token, leaseEnd = grantLease(KEYS[1], cur, ARGV[1], ttlMs, ARGV[3], graceMs, ARGV[8], maxQuotaSlots < 0 and 0 or nil)
  setLockDelay(KEYS[1], cur, ARGV[1], ARGV[10])
  publishChange(ARGV[6], ARGV[7], cur)
  return {1, token, leaseEnd}
end
if live and ARGV[8] ~= '' and cur[4] then
  if cur[4] == ARGV[8] then
    -- A retry of the acquire that granted this lease, whose answer was lost: the same grant again. Its
    -- record's TTL is set again as it is (a write, in either record layout), so that a WAIT on this
    -- connection (replica acknowledgement) covers the grant behind it: a replica that has this write
    -- has every earlier one.
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl > 0 then
      redis.call('PEXPIRE', KEYS[1], pttl)
    end
    return {4, cur[3], expiresAt, cur[1], cur[5] or ''}
  end
  -- The scope is everything before the first ':' (base64url holds none).
  if string.match(cur[4], '^[^:]*') == string.match(ARGV[8], '^[^:]*') then
    return {6}
  end
end

local retryAfter = math.max(1, expiresAt - nowMs, delayLeft)
local waitMs, maxWaiters, livenessMs, waiterId, instanceId = string.match(ARGV[5], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
waitMs = tonumber(waitMs)
makeQueueHelpers()
local refused = notQueued(KEYS, waitMs, tonumber(maxWaiters), retryAfter)
if refused then
  return refused
end
local full = maxQuotaSlots > 0 and quotaTake(KEYS[4], KEYS[5], nowMs + waitMs + ttlMs, maxQuotaSlots)
if full then
  return {5, full}
end

-- A waiter that took no unit (its quota counted around the lock scripts) is written with its lease
-- length led by a 0 (a length is never 0): the hand-over and a cancel then give back and record none.
local keep = enqueue(KEYS, waiterId, waitMs, tonumber(livenessMs), (maxQuotaSlots < 0 and '0' or '') .. ARGV[2] .. '|' .. ARGV[1] .. '|' .. instanceId .. '|' .. ARGV[3])
-- The record says so (q), and lives as long as the queue: a lease (live or in its lock-delay) keeps it
-- until its end plus the grace so far.
cur[6] = math.max(cur[6] or 0, nowMs + keep)
writeLock(KEYS[1], cur, expiresAt + graceMs - nowMs)
return {3, retryAfter}
