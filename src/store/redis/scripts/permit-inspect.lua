--[[
permit-inspect: read the live leases of a semaphore or read/write lock, timed on the Redis clock.
Read-only; owner tokens are never returned. Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends

Returns:
  {1, capacity, waiters, nowMs, weight1, fencingToken1, expiresAtMs1, holder1, weight2, ...}
        live leases in order of their ends (holder "" when none); waiters counts live waiters only;
        nowMs is the Redis clock the answer was read at (time left = expiresAtMs - nowMs)
  {0}   no live lease
]]
--- @include "_handover"
--- @include "_permits"

local owners = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. fmt(nowMs), '+inf')
if #owners == 0 then
  return {0}
end
local reply = {1, tonumber(redis.call('HGET', KEYS[1], 'c')) or 0, liveWaiters(KEYS, false), nowMs}
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
