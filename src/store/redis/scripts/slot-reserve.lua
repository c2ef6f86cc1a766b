--[[
slot-reserve: take one of a namespace's quota slots, if one is free. A slot is one lease's claim on
the namespace's cap of locks held at once: member = slot id (the lease's owner token), score = when
the slot ends (Unix ms on the Redis clock). Ended slots are dropped first, so a lease that expired
without a release stops counting by itself. The set expires with its last slot.

KEYS[1]  the namespace's slot set
ARGV[1]  slot id
ARGV[2]  slot length from now, ms (integer > 0)
ARGV[3]  most slots the namespace may have at once (integer > 0)

Returns:
  {1}                 reserved (or the slot already existed; its end moves later, never earlier)
  {0, retryAfterMs}   the namespace is full; retryAfterMs = time until its earliest slot ends (>= 1)
]]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
local endMs = nowMs + tonumber(ARGV[2])

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local earliest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(earliest[2]) - nowMs)}
end

redis.call('ZADD', KEYS[1], 'GT', endMs, ARGV[1])
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(latest[2]) - nowMs))
return {1}
