--[[
permit-force-release: end every live lease of a semaphore or read/write lock, whoever holds them (an
administrator's override), and hand the room to the queue. The last fencing token stays, so every later
grant is numbered above the evicted ones. Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]  fencing grace, ms
ARGV[2]  grant channel prefix
ARGV[3]  the key's name
ARGV[4]  the fencing token of the one lease to evict, or "" for all of them: with a token, only the
         live lease with that token ends (none when it is no longer live)

Returns:
  {ownerToken1, fencingToken1, holder1, expiresAtMs1, ...}
         the evicted leases (holder "" when none) with the end each had (its quota slot is retired until
         then: quota-free.lua); {} when none
]]
--- @include "_handover"
--- @include "_permits"

prunePermits(KEYS)
if ARGV[4] ~= '' then
  local wanted = tonumber(ARGV[4])
  local live = redis.call('ZRANGE', KEYS[4], 0, -1)
  for i = 1, #live do
    local weight, token, endMs, holder = permitRecord(KEYS, live[i])
    if weight and token == wanted then
      redis.call('HDEL', KEYS[1], 'o:' .. live[i], 'r:' .. live[i])
      redis.call('ZREM', KEYS[4], live[i])
      redis.call('HSET', KEYS[1], 'u', fmt(math.max(0, (tonumber(redis.call('HGET', KEYS[1], 'u')) or 0) - weight)))
      permitChanged(KEYS, ARGV[2])
      handOverPermits(KEYS, tonumber(ARGV[1]), ARGV[2], ARGV[3])
      return {live[i], token, holder, endMs}
    end
  end
  return {}
end
local owners = redis.call('ZRANGE', KEYS[4], 0, -1)
local reply = {}
for i = 1, #owners do
  local weight, token, endMs, holder = permitRecord(KEYS, owners[i])
  if weight then
    reply[#reply + 1] = owners[i]
    reply[#reply + 1] = token
    reply[#reply + 1] = holder
    reply[#reply + 1] = endMs
    redis.call('HDEL', KEYS[1], 'o:' .. owners[i], 'r:' .. owners[i])
  end
end
redis.call('DEL', KEYS[4])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'u', '0')
  if #reply > 0 then
    permitChanged(KEYS, ARGV[2])
  end
end
handOverPermits(KEYS, tonumber(ARGV[1]), ARGV[2], ARGV[3])
return reply
