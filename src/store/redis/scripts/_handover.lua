--[[
Shared include (not a command of its own): pulled in with `--- @include "_handover"` by the scripts
that may find a lock free while callers are queued for it (acquire, release, force-release,
heartbeat), and by inspect, which counts the live waiters. Uses nowMs, nowUs, fmt and isLive from _common.lua. Defines:

  grantLease(lockKey, lastToken, owner, ttlMs, holder, graceMs, idem, clean) -> token, expiresAtMs
  handOverFree(KEYS, lastToken, graceMs, channelPrefix, lockName) -> waiterId or nil
  handOver(KEYS, graceMs, channelPrefix, lockName) -> waiterId or nil
  waiterLive(record) -> boolean      whether a waiter record (below) is live
  liveWaiters(KEYS, prune) -> count  the live waiters; with prune, dead records are dropped
  refreshWaiters(KEYS, livenessMs, from)   heartbeat: ARGV[from], ARGV[from + 2], ... are waiter ids
                                     whose records are kept alive another livenessMs (up to their deadline)

The wait queue of a lock is two keys beside its hash, sharing its hash tag:
  queue   ZSET   member = waiter id, score = arrival time (us, Redis clock): FIFO order
  waiters HASH   waiter id -> "aliveUntilMs|deadlineMs|ttlMs|ownerToken|instanceId|holder"
A waiter is live while both aliveUntilMs (pushed forward by its instance's heartbeat) and deadlineMs
(the end of its waitMs) are in the future. Dead waiters are dropped when they reach the head.

handOver gives a free lock to the first live waiter only (no thundering herd) and tells that waiter's
instance on channel channelPrefix..instanceId: "waiterId|fencingToken|expiresAtMs|lockName".

The lock's watchers are told of every hand-over (publishChange, _watch.lua); a lock in its lock-delay
(_delay.lua) is not handed over by handOver until the delay ends (a heartbeat then does it).
]]
--- @include "_watch"
--- @include "_delay"

-- The fencing rule: above the last token, and never below the Redis clock in microseconds, so a lost
-- hash (restart without persistence, FLUSHALL, deleted key) never lets a token go back.
-- Values stay below 2^53, so Lua's doubles hold them exactly.
-- The holder label (h) and idempotency key (i) are set when given and otherwise removed, so neither is
-- ever left over from an earlier lease (an old idempotency key must never answer with a new owner's lease).
-- clean: the caller has read the hash and it holds neither (so there is nothing to remove).
local function grantLease(lockKey, lastToken, owner, ttlMs, holder, graceMs, idem, clean)
  local token = math.max((tonumber(lastToken) or 0) + 1, nowUs)
  local expiresAt = nowMs + ttlMs
  local set, unset = {'o', owner, 'e', fmt(expiresAt), 't', fmt(token)}, {}
  if holder ~= '' then
    set[#set + 1] = 'h'
    set[#set + 1] = holder
  else
    unset[#unset + 1] = 'h'
  end
  if idem ~= '' then
    set[#set + 1] = 'i'
    set[#set + 1] = idem
  else
    unset[#unset + 1] = 'i'
  end
  redis.call('HSET', lockKey, unpack(set))
  if #unset > 0 and not clean then
    redis.call('HDEL', lockKey, unpack(unset))
  end
  redis.call('PEXPIRE', lockKey, ttlMs + graceMs)
  return token, expiresAt
end

local function waiterLive(record)
  local aliveUntil, deadline = string.match(record, '^(%d+)|(%d+)|')
  return aliveUntil ~= nil and tonumber(aliveUntil) > nowMs and tonumber(deadline) > nowMs
end

-- Callers queued and still there, the number the embedded store reports too. Dead records (an instance
-- that died, a wait that ran out before its cancel arrived) are only dropped when they reach the head,
-- so ZCARD over-counts them. This walks the key's records: O(waiters on this key), at most the per-key
-- cap, paid only by inspect and by an acquire that finds the queue full, never by a plain acquire,
-- renew or release.
local function liveWaiters(keys, prune)
  if redis.call('ZCARD', keys[2]) == 0 then
    return 0
  end
  local records = redis.call('HGETALL', keys[3])
  local live = 0
  for i = 1, #records, 2 do
    if waiterLive(records[i + 1]) then
      live = live + 1
    elseif prune then
      redis.call('ZREM', keys[2], records[i])
      redis.call('HDEL', keys[3], records[i])
    end
  end
  return live
end

local function refreshWaiters(keys, livenessMs, from)
  for i = from, #ARGV, 2 do
    local raw = redis.call('HGET', keys[3], ARGV[i])
    if raw then
      local rest = string.match(raw, '^%d+|(%d+|.*)$')
      local deadline = tonumber(string.match(rest, '^(%d+)'))
      redis.call('HSET', keys[3], ARGV[i], fmt(math.min(deadline, nowMs + livenessMs)) .. '|' .. rest)
    end
  end
end

-- The lock is not live (the caller has checked) and its last fencing token is lastToken.
local function handOverFree(keys, lastToken, graceMs, channelPrefix, lockName)
  while true do
    local head = redis.call('ZRANGE', keys[2], 0, 0)
    if #head == 0 then
      return nil
    end
    local id = head[1]
    local raw = redis.call('HGET', keys[3], id)
    redis.call('ZREM', keys[2], id)
    redis.call('HDEL', keys[3], id)
    if raw then
      local ttl, owner, instance, holder = string.match(raw, '^%d+|%d+|(%d+)|([^|]+)|([^|]+)|(.*)$')
      if ttl and waiterLive(raw) then
        local token, leaseEnd = grantLease(keys[1], lastToken, owner, tonumber(ttl), holder, graceMs, '', false)
        redis.call('PUBLISH', channelPrefix .. instance, id .. '|' .. fmt(token) .. '|' .. fmt(leaseEnd) .. '|' .. lockName)
        publishChange(channelPrefix, lockName)
        return id
      end
    end
  end
end

local function handOver(keys, graceMs, channelPrefix, lockName)
  local cur = redis.call('HMGET', keys[1], 'o', 'e', 't')
  if isLive(cur[1], tonumber(cur[2])) or lockDelayLeft(keys[1], cur[1], tonumber(cur[2])) > 0 then
    return nil
  end
  return handOverFree(keys, cur[3], graceMs, channelPrefix, lockName)
end
