--[[
permit-inspect: read the live leases of a semaphore or read/write lock, and its watch index, timed on
the Redis clock. Read-only; owner tokens are never returned. Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]    shown: most leases returned (the ones that end first)

Cost: O(log n + shown + waiters on this key), never O(n) in the live leases: a semaphore of 10,000
permits costs one inspect as much as one of a hundred (the count is a ZCOUNT, the page a ranged read
of the lease ends, and the waiters are bounded by the per-key cap).

Returns:
  {1, capacity, waiters, nowMs, index, count, weight1, fencingToken1, expiresAtMs1, holder1, asked1, weight2, ...}
        count: the live leases; then the first `shown` of them in order of their ends (holder "" when
        none; asked: the lease's release request, field r:<ownerToken>, or "" when none); waiters
        counts live waiters only; nowMs is the Redis clock the answer was read at (time left =
        expiresAtMs - nowMs)
  {0, index}   no live lease
index: the watch index (permitIndex, _permits.lua): rises on every grant, release, expiry, eviction.
]]
--- @include "_handover"
--- @include "_permits"

local index = permitIndex(KEYS)
local count = redis.call('ZCOUNT', KEYS[4], '(' .. fmt(nowMs), '+inf')
if count == 0 then
  return {0, index}
end
local owners = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. fmt(nowMs), '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
local reply = {1, tonumber(redis.call('HGET', KEYS[1], 'c')) or 0, liveWaiters(KEYS, false), nowMs, index, count}
-- The shown leases' release requests in one command, not one per lease.
local askedFields = {}
for i = 1, #owners do
  askedFields[i] = 'r:' .. owners[i]
end
local asked = #owners > 0 and redis.call('HMGET', KEYS[1], unpack(askedFields)) or {}
for i = 1, #owners do
  local weight, token, expiresAt, holder = permitRecord(KEYS, owners[i])
  if weight then
    reply[#reply + 1] = weight
    reply[#reply + 1] = token
    reply[#reply + 1] = expiresAt
    reply[#reply + 1] = holder
    reply[#reply + 1] = asked[i] or ''
  end
end
return reply
