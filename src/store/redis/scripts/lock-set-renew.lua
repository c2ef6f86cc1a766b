--[[
lock-set-renew: extend the lease of every lock of a set, only if the set's owner token holds a live
lease on every one of them; otherwise change nothing. The fencing tokens do not change.

KEYS[i]  lock i's hash, i = 1..n
ARGV[1]  owner token of the set
ARGV[2]  new lease length from now, ms (integer > 0)
ARGV[3]  fencing grace, ms

Returns:
  {1, expiresAtMs, fencingToken1, ..., fencingTokenN}   renewed, all of them
  {1, expiresAtMs, fencingToken1, ..., fencingTokenN, releaseRequest}
                                                        renewed, and the holder was asked to let go of one
                                                        of them (the first key's request with one: field r)
  {0}                                                   some lock is not held by this token; nothing changed
]]
--- @include "_lock"

local curs = {}
for i = 1, #KEYS do
  local cur = readLock(KEYS[i])
  if cur[1] ~= ARGV[1] or not isLive(cur[1], tonumber(cur[2])) then
    return {0}
  end
  curs[i] = cur
end
local ttl = tonumber(ARGV[2])
local reply = {1, nowMs + ttl}
local asked = nil
for i = 1, #KEYS do
  curs[i][2] = nowMs + ttl
  writeLock(KEYS[i], curs[i], ttl + tonumber(ARGV[3]))
  reply[#reply + 1] = tonumber(curs[i][3])
  asked = asked or curs[i][10]
end
if asked then
  reply[#reply + 1] = asked
end
return reply
