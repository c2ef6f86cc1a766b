--[[
permit-renew: extend one live lease of a semaphore or read/write lock, only for its owner. The fencing
token does not change. Keys and records: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1..3] as renew.lua's: owner token, new lease length from now (ms, integer > 0), fencing grace (ms)

Returns as renew.lua: {1, fencingToken, expiresAtMs} renewed ({1, fencingToken, expiresAtMs,
releaseRequest} when its holder was asked to let go: field r:<ownerToken>), or {0} when this token holds
no live lease (ended, released, evicted, unknown).
]]
--- @include "_handover"
--- @include "_permits"

local weight, token, expiresAt, holder = permitRecord(KEYS, ARGV[1])
if not weight or expiresAt <= nowMs then
  return {0}
end
local newEnd = nowMs + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'o:' .. ARGV[1], fmt(weight) .. '|' .. fmt(token) .. '|' .. fmt(newEnd) .. '|' .. holder)
redis.call('ZADD', KEYS[4], newEnd, ARGV[1])
keepUntil(KEYS[1], newEnd + tonumber(ARGV[3]))
keepUntil(KEYS[4], newEnd + tonumber(ARGV[3]))
local asked = redis.call('HGET', KEYS[1], 'r:' .. ARGV[1])
if asked then
  return {1, token, newEnd, asked}
end
return {1, token, newEnd}
