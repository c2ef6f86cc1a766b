--[[
acquire: grant the lock if nobody holds a live lease on it.

One hash per lock (all fields in one key, so one lock costs one key):
  o = owner token of the live lease (absent when free)
  e = lease end, Unix ms on the Redis clock (absent when free)
  h = holder label (optional)
  t = last fencing token issued for this lock
The key itself expires at lease end + grace, so an idle lock leaves nothing behind.

KEYS[1]  the lock hash
ARGV[1]  owner token of the new lease
ARGV[2]  lease length, ms (integer > 0)
ARGV[3]  holder label, "" for none
ARGV[4]  fencing grace, ms: how long the hash outlives the lease

Returns:
  {1, fencingToken, expiresAtMs}   granted
  {0, retryAfterMs}                held by a live lease; retryAfterMs = time left on it (>= 1)
]]
local now = redis.call('TIME')
local nowUs = tonumber(now[1]) * 1000000 + tonumber(now[2])
local nowMs = math.floor(nowUs / 1000)

local cur = redis.call('HMGET', KEYS[1], 'o', 'e', 't')
local expiresAt = tonumber(cur[2])
if cur[1] and expiresAt and expiresAt > nowMs then
  return {0, expiresAt - nowMs}
end

-- Floor at the Redis clock in microseconds: if the hash was lost (restart without persistence,
-- FLUSHALL, a deleted key) the next token is still above every token issued before.
-- Values stay below 2^53, so Lua's doubles hold them exactly.
local token = math.max((tonumber(cur[3]) or 0) + 1, nowUs)
local ttl = tonumber(ARGV[2])
local newExpiresAt = nowMs + ttl

-- %.0f: tostring() would print large numbers in exponent form and lose digits.
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'e', string.format('%.0f', newExpiresAt), 't', string.format('%.0f', token))
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'h', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'h')
end
redis.call('PEXPIRE', KEYS[1], ttl + tonumber(ARGV[4]))
return {1, token, newExpiresAt}
