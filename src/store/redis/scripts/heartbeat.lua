--[[
heartbeat: an instance's periodic (and lease-end) visit to a lock it has callers waiting on. Keeps
its waiters alive, hands a lock whose lease ran out to the first live waiter, and reports whether one
of its own waiters now holds the lock (in case the hand-over message was missed).

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
KEYS[4]  the count of the lock's quota shard (see _quota.lua): a waiter dropped as dead gives its unit back
KEYS[5]  the ends of the lock's quota shard
ARGV[1]  waiter liveness, ms
ARGV[2]  fencing grace, ms
ARGV[3]  grant channel prefix
ARGV[4]  lock name
ARGV[5], ARGV[6], ...  pairs of (waiter id, owner token) of this instance's waiters on this lock

Returns:
  {remainingLeaseMs, grantedWaiterId, lostWaiterId, ...}
                                        remainingLeaseMs: time left on the current lease, 0 when
                                        free; grantedWaiterId: the waiter of this instance that holds
                                        the lock now, or ""; then this instance's waiters that neither
                                        hold the lock nor are queued any more: their place is gone
                                        (the record lapsed while the instance could not reach Redis,
                                        and was dropped as a dead instance's), nothing will come
]]
--- @include "_handover"
makeQueueHelpers()

local liveness = tonumber(ARGV[1])

refreshWaiters(KEYS, liveness, 5)

local _, cur = handOver(KEYS, tonumber(ARGV[2]), ARGV[3], ARGV[4])
local expiresAt = tonumber(cur[2])
local live = isLive(cur[1], expiresAt)
local reply = {live and expiresAt - nowMs or 0, ''}
for i = 5, #ARGV, 2 do
  if live and ARGV[i + 1] == cur[1] then
    reply[2] = ARGV[i]
  elseif redis.call('ZSCORE', KEYS[2], ARGV[i]) == false then
    reply[#reply + 1] = ARGV[i]
  end
end
return reply
