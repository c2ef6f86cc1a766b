--[[
force-release: free a live lease whoever holds it (an administrator's override). Like release.lua
it keeps the last fencing token (for the grace period), so the next grant is numbered above the
evicted one; and the evicted owner token is gone, so it can no longer renew or release.
Hash layout: see acquire.lua.

KEYS[1]  the lock hash
ARGV[1]  fencing grace, ms

Returns:
  {1, fencingToken, holder, evictedOwnerToken}   released; holder is "" when none was given
  {0}                                            no live lease; nothing changed
]]
local now = redis.call('TIME')
local nowMs = math.floor((tonumber(now[1]) * 1000000 + tonumber(now[2])) / 1000)

local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't', 'h')
local expiresAt = tonumber(cur[2])
if not cur[1] or not expiresAt or expiresAt <= nowMs then
  return {0}
end

redis.call('HDEL', KEYS[1], 'o', 'e', 'h')
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return {1, tonumber(cur[3]), cur[4] or '', cur[1]}
