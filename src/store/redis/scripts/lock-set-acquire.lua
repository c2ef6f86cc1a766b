--[[
lock-set-acquire: grant every lock of a set to one owner token, or none of them. A set's locks are of
one namespace, so they share a hash tag and one Cluster slot: this one script sees and changes them all
at once, and nobody ever sees part of a set held. Nothing is held while deciding, so two overlapping
sets asked for in any order cannot deadlock: one gets everything, the other nothing.
Hash and queue layout: see acquire.lua and _handover.lua.

KEYS[5i-4] .. KEYS[5i]   lock i's hash, wait queue (ZSET), waiter records (HASH) and quota shard (count,
                         ends: a waiter dropped from the queue gives its unit back there), i = 1..n
ARGV[1]      owner token of the set (the same on every lock)
ARGV[2]      lease length, ms (integer > 0)
ARGV[3]      holder label, "" for none
ARGV[4]      fencing grace, ms
ARGV[5]      lock-delay, ms (0 = none)
ARGV[6]      grant channel prefix (hand-overs and change notices)
ARGV[6 + i]  lock i's name (for messages)

Returns:
  {1, expiresAtMs, fencingToken1, ..., fencingTokenN}   every lock granted
  {0, retryAfterMs, busyIndex}   nothing granted: lock busyIndex (0-based) has a live lease, a running
                                 lock-delay or live callers queued; retryAfterMs: the longest time
                                 left on any busy lock (at least 1)
]]
--- @include "_handover"
makeQueueHelpers()

local n = #KEYS / 5
local graceMs = tonumber(ARGV[4])
local ttl = tonumber(ARGV[2])
local curs = {}
local busy, longest = 0, 0
for i = 1, n do
  local keys = {KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1], KEYS[5 * i]}
  -- A lease that ran out with callers queued is theirs (as in acquire.lua).
  local _, cur = handOver(keys, graceMs, ARGV[6], ARGV[6 + i])
  local expiresAt = tonumber(cur[2])
  local left
  if isLive(cur[1], expiresAt) then
    left = expiresAt - nowMs
  else
    left = lockDelayLeft(cur)
    if left == 0 and queuedNow(cur) and liveWaiters(keys, false) > 0 then
      left = 1
    end
  end
  if left > 0 then
    if busy == 0 then
      busy = i
    end
    longest = math.max(longest, left)
  end
  curs[i] = cur
end
if busy > 0 then
  return {0, math.max(1, longest), busy - 1}
end

local reply = {1, nowMs + ttl}
for i = 1, n do
  local lockKey = KEYS[5 * i - 4]
  -- Field b = 0: a set's quota is counted around the lock scripts (one unit a set, the quota-slot calls), so
  -- a plain release, renew or force release of one of its keys gives back and moves nothing here.
  local token = grantLease(lockKey, curs[i], ARGV[1], ttl, ARGV[3], graceMs, '', 0)
  setLockDelay(lockKey, curs[i], ARGV[1], ARGV[5])
  publishChange(ARGV[6], ARGV[6 + i], curs[i])
  reply[#reply + 1] = token
end
return reply
