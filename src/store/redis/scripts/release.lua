--[[
release: free a live lease, only for its owner. The last fencing token stays (for the grace period),
so the next grant is numbered above it even inside the same microsecond.
Hash layout: see acquire.lua.

KEYS[1]  the lock hash
ARGV[1]  owner token
ARGV[2]  fencing grace, ms

Returns:
  1   released
  0   this token holds no live lease (expired, released, taken, unknown); nothing changed
]]
local now = redis.call('TIME')
local nowMs = math.floor((tonumber(now[1]) * 1000000 + tonumber(now[2])) / 1000)

local cur = redis.call('HMGET', KEYS[1], 'o', 'e')
local expiresAt = tonumber(cur[2])
if cur[1] ~= ARGV[1] or not expiresAt or expiresAt <= nowMs then
  return 0
end

redis.call('HDEL', KEYS[1], 'o', 'e', 'h')
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
