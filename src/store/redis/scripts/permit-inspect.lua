--[[
permit-inspect: read the live leases of a semaphore or read/write lock, and its watch index, timed on
the Redis clock. Read-only; owner tokens are never returned. Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends

Returns:
  {1, capacity, waiters, nowMs, index, weight1, fencingToken1, expiresAtMs1, holder1, weight2, ...}
        live leases in order of their ends (holder "" when none); waiters counts live waiters only;
        nowMs is the Redis clock the answer was read at (time left = expiresAtMs - nowMs)
  {0, index}   no live lease
index: the watch index (permitIndex, _permits.lua): rises on every grant, release, expiry, eviction.
]]
--- @include "_handover"
--- @include "_permits"

local index = permitIndex(KEYS)
local owners = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. fmt(nowMs), '+inf')
if #owners == 0 then
  return {0, index}
end
local reply = {1, tonumber(redis.call('HGET', KEYS[1], 'c')) or 0, liveWaiters(KEYS, false), nowMs, index}
for i = 1, #owners do
  local weight, token, expiresAt, holder = permitRecord(KEYS, owners[i])
  if weight then
    reply[#reply + 1] = weight
    reply[#reply + 1] = token
    reply[#reply + 1] = expiresAt
    reply[#reply + 1] = holder
  end
end
return reply
