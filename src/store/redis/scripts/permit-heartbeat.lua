--[[
permit-heartbeat: an instance's periodic (and lease-end) visit to a semaphore or read/write lock it has
callers waiting on: keeps its waiters alive, hands room freed by ended leases to the queue, and reports
which of its own waiters hold a lease now (in case a hand-over message was missed). Keys: see
_permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]  waiter liveness, ms
ARGV[2]  fencing grace, ms
ARGV[3]  grant channel prefix
ARGV[4]  the key's name
ARGV[5], ARGV[6], ...  pairs of (waiter id, owner token) of this instance's waiters on this key

Returns:
  {remainingMs, grantedWaiterId, ...}   remainingMs: time left on the earliest-ending live lease, 0
                                        when none; then this instance's waiters that hold a lease, and
                                        "!" .. waiterId for each of them that neither holds a lease nor
                                        is queued any more: its place is gone (its record lapsed while
                                        the instance could not reach Redis, and was dropped as a dead
                                        instance's), and nothing will be handed to it
]]
--- @include "_handover"
--- @include "_permits"

refreshWaiters(KEYS, tonumber(ARGV[1]), 5)
handOverPermits(KEYS, tonumber(ARGV[2]), ARGV[3], ARGV[4])

local reply = {math.max(0, firstEnd(KEYS) or 0)}
for i = 5, #ARGV, 2 do
  local weight, _, expiresAt = permitRecord(KEYS, ARGV[i + 1])
  local queued = redis.call('ZSCORE', KEYS[2], ARGV[i]) ~= false
  if weight and expiresAt > nowMs and not queued then
    reply[#reply + 1] = ARGV[i]
  elseif not queued then
    reply[#reply + 1] = '!' .. ARGV[i]
  end
end
return reply
