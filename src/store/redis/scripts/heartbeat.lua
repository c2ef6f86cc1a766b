--[[
heartbeat: an instance's periodic (and lease-end) visit to a lock it has callers waiting on. Keeps
its waiters alive, hands a lock whose lease ran out to the first live waiter, and reports whether one
of its own waiters now holds the lock (in case the hand-over message was missed).

KEYS[1]  the lock record
KEYS[2]  the lock's wait queue (ZSET)
KEYS[3]  the lock's waiter records (HASH)
ARGV[1]  waiter liveness, ms
ARGV[2]  fencing grace, ms
ARGV[3]  grant channel prefix
ARGV[4]  lock name
ARGV[5], ARGV[6], ...  pairs of (waiter id, owner token) of this instance's waiters on this lock

Returns:
  {remainingLeaseMs, grantedWaiterId}   remainingLeaseMs: time left on the current lease, 0 when
                                        free; grantedWaiterId: the waiter of this instance that holds
                                        the lock now, or ""
]]
--- @include "_handover"
makeQueueHelpers()

local liveness = tonumber(ARGV[1])

refreshWaiters(KEYS, liveness, 5)

local _, cur = handOver(KEYS, tonumber(ARGV[2]), ARGV[3], ARGV[4])
local expiresAt = tonumber(cur[2])
if not isLive(cur[1], expiresAt) then
  return {0, ''}
end
local granted = ''
for i = 5, #ARGV, 2 do
  if ARGV[i + 1] == cur[1] then
    granted = ARGV[i]
  end
end
return {expiresAt - nowMs, granted}
