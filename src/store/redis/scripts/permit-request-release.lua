--[[
permit-request-release: ask the holder of the live semaphore or read/write lock lease with a given
fencing token to let go, without evicting it. Stored as field r:<ownerToken> of the pool hash, beside
the lease's o: field, and dropped with it (release, eviction, pruning of an ended lease); renewing the
lease answers it. Asking again replaces it. Watchers are told (publishChange), so their next answer
shows it; the watch index does not move (no lease began or ended). Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]  the fencing token of the lease whose holder is asked
ARGV[2]  the request as the store writes it back (JSON [by, reason]; opaque here)
ARGV[3]  grant channel prefix

Returns:
  {1, atMs}   stored (atMs: now, Redis clock)
  {0}         no live lease has that fencing token; nothing changed
]]
--- @include "_handover"
--- @include "_permits"

local wanted = tonumber(ARGV[1])
-- Live leases only (an ended one may still lie in the hash until pruned): O(live leases), an operator's call.
local live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. fmt(nowMs), '+inf')
for i = 1, #live do
  local weight, token = permitRecord(KEYS, live[i])
  if weight and token == wanted then
    redis.call('HSET', KEYS[1], 'r:' .. live[i], fmt(nowMs) .. '|' .. ARGV[2])
    publishChange(ARGV[3], KEYS[1])
    return {1, nowMs}
  end
end
return {0}
