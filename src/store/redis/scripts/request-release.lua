--[[
request-release: ask the holder of the live lease with a given fencing token to let go, without
evicting it. The request is field r of the lock record, so it goes with the lease: a grant, release,
eviction or hand-over drops it (grantLease, freeLease in _handover.lua), and an expired lease's is
never read (renew answers only a live lease). Asking again replaces it. Record layout: see acquire.lua.
Watchers are told (publishChange), so their next answer shows it; the watch index does not move (the
holder is the same).

KEYS[1]  the lock record
ARGV[1]  the fencing token of the lease whose holder is asked
ARGV[2]  the request as the store writes it back (JSON [by, reason]; opaque here)
ARGV[3]  grant channel prefix
ARGV[4]  the lock's name (its change channel)

Returns:
  {1, atMs}   stored (atMs: now, Redis clock)
  {0}         no live lease, or the live one has another fencing token; nothing changed
]]
--- @include "_lock"
--- @include "_watch"

local cur = readLock(KEYS[1])
if not isLive(cur[1], tonumber(cur[2])) or tonumber(cur[3]) ~= tonumber(ARGV[1]) then
  return {0}
end
cur[10] = fmt(nowMs) .. '|' .. ARGV[2]
-- KEEPTTL: the record lives exactly as long as it did.
writeLock(KEYS[1], cur, nil)
publishChange(ARGV[3], ARGV[4], cur)
return {1, nowMs}
