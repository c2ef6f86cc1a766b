--[[
permit-acquire: take a semaphore permit or a read/write lease (a weighted FIFO semaphore; keys, hash
and records: see _permits.lua). Granted if nobody live is queued and the weight fits beside the live
leases; otherwise queued (when the caller waits) or refused. A caller whose capacity differs from the
live leases' is refused whatever else holds.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends (see _permits.lua)
ARGV[1]  owner token of the new lease
ARGV[2]  lease length, ms (integer > 0)
ARGV[3]  holder label, "" for none (may contain "|": it is the last field of each record)
ARGV[4]  weight: units of the capacity this lease takes (1 to ARGV[5])
ARGV[5]  capacity: the semaphore's limit (the read/write lock's reader cap)
ARGV[6]  fencing grace, ms: how long the pool outlives its last lease
ARGV[7]  wait, ms: 0 = do not wait
ARGV[8]  waiter id (unique; used when queued)
ARGV[9]  instance id of the caller's keyholder (its grant channel)
ARGV[10] most waiters allowed on this key
ARGV[11] waiter liveness, ms
ARGV[12] grant channel prefix
ARGV[13] the key's name (for the hand-over message)

Returns:
  {1, fencingToken, expiresAtMs}   granted to the caller
  {0, retryAfterMs}                no room (or others are queued) and the caller does not wait
  {2, retryAfterMs}                no room and the queue already holds ARGV[10] live waiters
  {3, retryAfterMs}                queued; the grant will come as a hand-over message
  {5, liveCapacity, retryAfterMs}  live leases were granted under another capacity; retryAfterMs is
                                   the time left on the last of them
retryAfterMs (0, 2, 3): time left on the earliest-ending live lease, at least 1.
]]
--- @include "_handover"
--- @include "_permits"

local graceMs = tonumber(ARGV[6])
-- Room freed by ended leases belongs to the callers already queued, not to this newcomer.
handOverPermits(KEYS, graceMs, ARGV[12], ARGV[13])

local weight, capacity = tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('ZCARD', KEYS[4]) > 0 then
  local live = tonumber(redis.call('HGET', KEYS[1], 'c')) or 0
  if live ~= capacity then
    return {5, live, math.max(1, lastEnd(KEYS))}
  end
end
if redis.call('ZCARD', KEYS[2]) == 0 and usedOf(KEYS) + weight <= capacity then
  local token, leaseEnd = grantPermit(KEYS, ARGV[1], tonumber(ARGV[2]), weight, ARGV[3], capacity, graceMs)
  return {1, token, leaseEnd}
end

local retryAfter = math.max(1, firstEnd(KEYS) or 1)
local waitMs = tonumber(ARGV[7])
local refused = notQueued(KEYS, waitMs, tonumber(ARGV[10]), retryAfter)
if refused then
  return refused
end
enqueue(KEYS, ARGV[8], waitMs, tonumber(ARGV[11]), ARGV[2] .. '|' .. ARGV[1] .. '|' .. ARGV[9] .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. ARGV[3])
return {3, retryAfter}
