--[[
Shared include (not a command of its own): pulled in with `--- @include "_handover"` by the scripts
that may find a lock free while callers are queued for it (acquire, release, force-release,
heartbeat, the lock sets), by inspect, which counts the live waiters, and by the permit scripts, which
share the queue. Uses nowMs, nowUs, fmt, max and isLive from _common.lua, readLock and friends from
_lock.lua. Defines:

  grantLease(lockKey, cur, owner, ttlMs, holder, graceMs, idem, unitSec) -> token, expiresAtMs   (updates cur;
                                     unitSec: the second of a waiter's quota unit (field b), or nil)
  handOverFree(KEYS, cur, graceMs, channelPrefix, lockName, selfInstance) -> waiterId or nil, token, endMs, told
                                     selfInstance: the calling instance's id, or nil; a waiter of that instance is
                                     not sent the message (told false): the caller answers it from the reply
  handOver(KEYS, graceMs, channelPrefix, lockName) -> waiterId or nil, cur
  freeLease(lockKey, cur, graceMs)   ends the lease in cur, keeping the last token for the grace
  makeQueueHelpers()                 makes the wait-queue helpers below (once per run): call it before
                                     using any of them (handOverFree calls it itself)
  waiterLive(record) -> boolean      whether a waiter record (below) is live
  liveWaiters(KEYS, prune) -> count  the live waiters; with prune, dead records are dropped
  refreshWaiters(KEYS, livenessMs, from)   heartbeat: ARGV[from], ARGV[from + 2], ... are waiter ids
                                     whose records are kept alive another livenessMs (up to their deadline)
  notQueued(KEYS, waitMs, maxWaiters, retryAfterMs) -> reply or nil   refusal of a caller that may not queue
  enqueue(KEYS, id, waitMs, livenessMs, rest) -> keepMs   queues waiter id (record: "...|" .. rest)
  queueHead(KEYS) -> id, record      the first waiter (nil when none; its record may be gone)
  dropWaiter(KEYS, id)               takes a waiter out of the queue and its record
  tellWaiter(channelPrefix, instance, id, token, endMs, name)   the hand-over message

The wait queue of a lock is two keys beside its record, sharing its hash tag:
  queue   ZSET   member = waiter id, score = arrival time (us, Redis clock): FIFO order
  waiters HASH   waiter id -> "aliveUntilMs|deadlineMs|ttlMs|ownerToken|instanceId|holder"
A waiter is live while both aliveUntilMs (pushed forward by its instance's heartbeat) and deadlineMs
(the end of its waitMs) are in the future. Dead waiters are dropped when they reach the head.
The lock record's field q says until when the queue may exist (acquire.lua sets it when it queues
someone; it is dropped once the queue is found empty), so scripts look at the queue only then.

handOver gives a free lock to the first live waiter only (no thundering herd) and tells that waiter's
instance on channel channelPrefix..instanceId: "waiterId|fencingToken|expiresAtMs|lockName", unless
that instance is the one running the script and said so (release.lua): it learns of the hand-over from
the script's reply, one hop sooner, and Redis publishes nothing.

The lock's watchers are told of every hand-over (publishChange, _watch.lua); a lock in its lock-delay
(_delay.lua) is not handed over by handOver until the delay ends (a heartbeat then does it).
]]
--- @include "_lock"
--- @include "_watch"
--- @include "_delay"
--- @include "_quota"

-- The fencing rule: above the last token, and never below the Redis clock in microseconds, so a lost
-- record (restart without persistence, FLUSHALL, deleted key) never lets a token go back.
-- Values stay below 2^53, so Lua's doubles (and cmsgpack's integers) hold them exactly.
-- The holder label (h) and idempotency key (i) are set when given and otherwise dropped, so neither is
-- ever left over from an earlier lease (an old idempotency key must never answer with a new owner's
-- lease); so is an earlier lease's lock-delay (d). One SET writes the record and its expiry.
local function grantLease(lockKey, cur, owner, ttlMs, holder, graceMs, idem, unitSec)
  local token = max((cur[3] or 0) + 1, nowUs)
  local expiresAt = nowMs + ttlMs
  cur[1], cur[2], cur[3] = owner, expiresAt, token
  cur[4] = idem ~= '' and idem or nil
  cur[5] = holder ~= '' and holder or nil
  cur[8] = unitSec
  cur[9], cur[10] = nil, nil
  writeLock(lockKey, cur, ttlMs + graceMs)
  return token, expiresAt
end

-- The wait-queue helpers are made by makeQueueHelpers, at the first look at a queue, not with the rest:
-- Redis runs a script's whole text on each call, so each helper defined at the top costs a closure per
-- call, and a plain acquire or release never looks at a queue. Scripts that use one call
-- makeQueueHelpers first (handOverFree does once the record says a queue may exist; the scripts that
-- always work with the queue at their start). Each helper is defined at two spaces up to an `end` line
-- at two spaces, so the ones a script never names are left out of it (withoutUnusedFunctions,
-- src/store/redis/scripts.ts).
local waiterLive, dropWaiter, queueHead, tellWaiter, liveWaiters, notQueued, enqueue, refreshWaiters, giveWaiterUnit
local queueHelpersMade = false

local function makeQueueHelpers()
  if queueHelpersMade then
    return
  end
  queueHelpersMade = true

  -- A lock waiter taken out of the queue without being granted (its wait ran out, or its instance stopped
  -- refreshing it) gives back the quota unit it took when it queued (acquire.lua), as its cancel would:
  -- the cancel that may follow finds no record and gives back nothing (cancel.lua), so the unit otherwise
  -- counted on for a whole wait + lease while the waiter held nothing. keys[4], keys[5]: the lock's quota
  -- shard (absent for a permit's queue, whose waiters take no unit in these scripts). A length led by a 0:
  -- a waiter that took none (acquire.lua). Made with the queue helpers, not at the top: a plain acquire
  -- or release never drops a waiter, and each top-level helper is a closure made on every run.
  function giveWaiterUnit(keys, raw)
    if not keys[5] or not raw then
      return
    end
    local second = waiterUnitSecond(raw)
    if second then
      quotaGive(keys[4], second)
    end
  end
  function waiterLive(record)
    local aliveUntil, deadline = string.match(record, '^(%d+)|(%d+)|')
    return aliveUntil ~= nil and tonumber(aliveUntil) > nowMs and tonumber(deadline) > nowMs
  end

  function dropWaiter(keys, id)
    redis.call('ZREM', keys[2], id)
    redis.call('HDEL', keys[3], id)
  end

  function queueHead(keys)
    local head = redis.call('ZRANGE', keys[2], 0, 0)
    if #head == 0 then
      return nil
    end
    return head[1], redis.call('HGET', keys[3], head[1])
  end

  function tellWaiter(channelPrefix, instance, id, token, endMs, name)
    redis.call('PUBLISH', channelPrefix .. instance, id .. '|' .. fmt(token) .. '|' .. fmt(endMs) .. '|' .. name)
  end

  -- Callers queued and still there, the number the embedded store reports too. Dead records (an instance
  -- that died, a wait that ran out before its cancel arrived) are only dropped when they reach the head,
  -- so ZCARD over-counts them. This walks the key's records: O(waiters on this key), at most the per-key
  -- cap, paid only by inspect and by an acquire that finds the queue full, never by a plain acquire,
  -- renew or release.
  function liveWaiters(keys, prune)
    if redis.call('ZCARD', keys[2]) == 0 then
      return 0
    end
    local records = redis.call('HGETALL', keys[3])
    local live = 0
    for i = 1, #records, 2 do
      if waiterLive(records[i + 1]) then
        live = live + 1
      elseif prune then
        dropWaiter(keys, records[i])
        giveWaiterUnit(keys, records[i + 1])
      end
    end
    return live
  end

  -- The answer to a caller that may not queue: it does not wait ({0, retryAfterMs}), or maxWaiters live
  -- waiters are queued already ({2, retryAfterMs}); nil when it may. The cap counts live waiters only:
  -- dead records are swept out of a full queue before it refuses anyone.
  function notQueued(keys, waitMs, maxWaiters, retryAfter)
    if waitMs <= 0 then
      return {0, retryAfter}
    end
    if redis.call('ZCARD', keys[2]) >= maxWaiters and liveWaiters(keys, true) >= maxWaiters then
      return {2, retryAfter}
    end
    return nil
  end

  -- The record is "aliveUntilMs|deadlineMs|" .. rest. The queue outlives its longest wait, and then
  -- disappears with nothing left behind; returns how long it is kept from now.
  function enqueue(keys, id, waitMs, livenessMs, rest)
    local deadline = nowMs + waitMs
    redis.call('ZADD', keys[2], nowUs, id)
    redis.call('HSET', keys[3], id, fmt(math.min(deadline, nowMs + livenessMs)) .. '|' .. fmt(deadline) .. '|' .. rest)
    local keep = waitMs + 1000
    for i = 2, 3 do
      if redis.call('PTTL', keys[i]) < keep then
        redis.call('PEXPIRE', keys[i], keep)
      end
    end
    return keep
  end

  function refreshWaiters(keys, livenessMs, from)
    for i = from, #ARGV, 2 do
      local raw = redis.call('HGET', keys[3], ARGV[i])
      if raw then
        local rest = string.match(raw, '^%d+|(%d+|.*)$')
        local deadline = tonumber(string.match(rest, '^(%d+)'))
        redis.call('HSET', keys[3], ARGV[i], fmt(math.min(deadline, nowMs + livenessMs)) .. '|' .. rest)
      end
    end
  end
end

-- The lock is not live (the caller has checked); cur is its record as read (and updated) by the caller.
local function handOverFree(keys, cur, graceMs, channelPrefix, lockName, selfInstance)
  -- queuedNow (_lock.lua), written out: a plain acquire or release then makes no closure for it.
  if (cur[6] or 0) <= nowMs then
    return nil
  end
  makeQueueHelpers()
  while true do
    local id, raw = queueHead(keys)
    if not id then
      -- Nobody left: later calls need not look again.
      cur[6] = nil
      writeLock(keys[1], cur)
      return nil
    end
    dropWaiter(keys, id)
    if raw then
      local deadline, ttl, owner, instance, holder = string.match(raw, '^%d+|(%d+)|(%d+)|([^|]+)|([^|]+)|(.*)$')
      if ttl and waiterLive(raw) then
        -- The waiter's quota unit (acquire.lua) stays counted to its wait's end plus its lease; a length
        -- led by a 0 is a waiter that took none (field b = 0).
        local unitSec = string.byte(ttl, 1) == 48 and 0 or math.ceil((tonumber(deadline) + tonumber(ttl)) / 1000)
        local token, leaseEnd = grantLease(keys[1], cur, owner, tonumber(ttl), holder, graceMs, '', unitSec)
        local told = instance ~= selfInstance
        if told then
          tellWaiter(channelPrefix, instance, id, token, leaseEnd, lockName)
        end
        publishChange(channelPrefix, lockName, cur)
        return id, token, leaseEnd, told
      end
      giveWaiterUnit(keys, raw)
    end
  end
end

local function handOver(keys, graceMs, channelPrefix, lockName)
  local cur = readLock(keys[1])
  if isLive(cur[1], cur[2]) or lockDelayLeft(cur) > 0 then
    return nil, cur
  end
  return handOverFree(keys, cur, graceMs, channelPrefix, lockName), cur
end

-- Ends the live lease in cur (release, force release): the last token stays for the grace period.
local function freeLease(lockKey, cur, graceMs)
  cur[1], cur[2], cur[4], cur[5], cur[8], cur[9], cur[10] = nil, nil, nil, nil, nil, nil, nil
  writeLock(lockKey, cur, graceMs)
end
