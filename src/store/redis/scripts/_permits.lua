--[[
Shared include (not a command of its own) of the semaphore and read/write lock scripts (permit-*.lua),
pulled in after _handover.lua (whose waiterLive and liveWaiters it uses). A semaphore and a read/write
lock are one shape, a weighted FIFO semaphore (see src/domain/permit-values.ts): a key has a capacity,
each lease takes a weight of it, and the queue's head is granted as soon as its weight fits.

KEYS[1]  the pool HASH:  t = last fencing token, c = capacity of the live leases, u = units in use,
                         n = changes (watch index, see permitIndex), o:<ownerToken> = "weight|fencingToken|expiresAtMs|holder" per lease,
                         r:<ownerToken> = a release request on that lease, "atMs|payload" (permit-request-release.lua),
                         dropped with its o: field
KEYS[2]  the wait queue (ZSET, as a lock's: waiter id by arrival time, us)
KEYS[3]  the waiter records (HASH): waiter id -> "aliveUntilMs|deadlineMs|ttlMs|ownerToken|instanceId|weight|capacity|holder"
KEYS[4]  the lease ends (ZSET): owner token -> expiresAtMs, so ended leases are found in order
The pool hash and the lease ends outlive the last lease by the fencing grace period, then vanish.

Defines:
  permitRecord(keys, owner) -> weight, fencingToken, expiresAtMs, holder   (nil when none)
  usedOf(keys) -> units held by live leases (after prunePermits)
  prunePermits(keys)            drops ended leases
  grantPermit(keys, owner, ttlMs, weight, holder, capacity, graceMs) -> token, expiresAtMs
  handOverPermits(keys, graceMs, channelPrefix, name) -> {waiterId, ...} granted, in queue order;
                                each is told on channelPrefix..instanceId as for locks
  firstEnd(keys), lastEnd(keys) -> ms left on the earliest / latest live lease, nil when none
  permitChanged(keys, channelPrefix)  a grant, release or eviction: the index rises, watchers are told
  permitIndex(keys) -> the watch index: n plus the leases ended but not yet pruned (an expiry writes
                       nothing, yet is a change; pruning moves it into n, so the index never drops)
]]
-- Every permit script works with the queue: the wait-queue helpers are made at once (_handover.lua).
makeQueueHelpers()

local function permitRecord(keys, owner)
  local raw = redis.call('HGET', keys[1], 'o:' .. owner)
  if not raw then
    return nil
  end
  local w, t, e, h = string.match(raw, '^(%d+)|(%d+)|(%d+)|(.*)$')
  return tonumber(w), tonumber(t), tonumber(e), h
end

local function usedOf(keys)
  if redis.call('ZCARD', keys[4]) == 0 then
    return 0
  end
  return tonumber(redis.call('HGET', keys[1], 'u')) or 0
end

local function prunePermits(keys)
  local gone = redis.call('ZRANGEBYSCORE', keys[4], '-inf', nowMs)
  if #gone == 0 then
    return
  end
  local used = tonumber(redis.call('HGET', keys[1], 'u')) or 0
  for i = 1, #gone do
    local w = permitRecord(keys, gone[i])
    if w then
      used = used - w
      redis.call('HDEL', keys[1], 'o:' .. gone[i], 'r:' .. gone[i])
    end
  end
  redis.call('ZREMRANGEBYSCORE', keys[4], '-inf', nowMs)
  if redis.call('EXISTS', keys[1]) == 1 then
    local n = tonumber(redis.call('HGET', keys[1], 'n')) or 0
    redis.call('HSET', keys[1], 'u', fmt(math.max(0, used)), 'n', fmt(n + #gone))
  end
end

local function permitIndex(keys)
  return (tonumber(redis.call('HGET', keys[1], 'n')) or 0) + redis.call('ZCOUNT', keys[4], '-inf', nowMs)
end

-- Floored at the clock in us, as fencing tokens are: a pool forgotten after the grace period starts
-- again above every index it showed before (_watch.lua for the notice).
local function permitChanged(keys, channelPrefix)
  local n = tonumber(redis.call('HGET', keys[1], 'n')) or 0
  redis.call('HSET', keys[1], 'n', fmt(math.max(n + 1, nowUs)))
  publishChange(channelPrefix, keys[1])
end

-- Keeps key k until untilMs (Redis clock); never shortens it.
local function keepUntil(k, untilMs)
  local pttl = redis.call('PTTL', k)
  if pttl == -1 or (pttl >= 0 and pttl < untilMs - nowMs) then
    redis.call('PEXPIRE', k, untilMs - nowMs)
  end
end

-- The fencing rule of locks (_handover.lua grantLease): above the last token and the clock in us.
local function grantPermit(keys, owner, ttlMs, weight, holder, capacity, graceMs)
  local token = math.max((tonumber(redis.call('HGET', keys[1], 't')) or 0) + 1, nowUs)
  local expiresAt = nowMs + ttlMs
  local used = usedOf(keys) + weight
  redis.call('HSET', keys[1], 't', fmt(token), 'c', fmt(capacity), 'u', fmt(used),
    'o:' .. owner, fmt(weight) .. '|' .. fmt(token) .. '|' .. fmt(expiresAt) .. '|' .. holder)
  redis.call('ZADD', keys[4], expiresAt, owner)
  keepUntil(keys[1], expiresAt + graceMs)
  keepUntil(keys[4], expiresAt + graceMs)
  return token, expiresAt
end

local function handOverPermits(keys, graceMs, channelPrefix, name)
  prunePermits(keys)
  local granted = {}
  while true do
    local id, raw = queueHead(keys)
    if not id then
      return granted
    end
    local ttl, owner, instance, weight, capacity, holder
    if raw and waiterLive(raw) then
      ttl, owner, instance, weight, capacity, holder = string.match(raw, '^%d+|%d+|(%d+)|([^|]+)|([^|]+)|(%d+)|(%d+)|(.*)$')
    end
    if ttl then
      weight, capacity = tonumber(weight), tonumber(capacity)
      -- With leases live, the pool's capacity rules (the waiter was queued under it); else the waiter's.
      if redis.call('ZCARD', keys[4]) > 0 then
        capacity = tonumber(redis.call('HGET', keys[1], 'c')) or capacity
      end
      if usedOf(keys) + weight > capacity then
        return granted
      end
    end
    dropWaiter(keys, id)
    if ttl then
      local token, leaseEnd = grantPermit(keys, owner, tonumber(ttl), weight, holder, capacity, graceMs)
      permitChanged(keys, channelPrefix)
      tellWaiter(channelPrefix, instance, id, token, leaseEnd, name)
      granted[#granted + 1] = id
    end
  end
end

local function firstEnd(keys)
  local e = redis.call('ZRANGE', keys[4], 0, 0, 'WITHSCORES')
  if #e == 0 then
    return nil
  end
  return tonumber(e[2]) - nowMs
end

local function lastEnd(keys)
  local e = redis.call('ZRANGE', keys[4], -1, -1, 'WITHSCORES')
  if #e == 0 then
    return nil
  end
  return tonumber(e[2]) - nowMs
end
