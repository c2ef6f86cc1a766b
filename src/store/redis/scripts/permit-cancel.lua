--[[
permit-cancel: take a waiter out of a semaphore's or read/write lock's queue (its wait ran out or its
caller left). If it was granted meanwhile, say so, so the grant is delivered or released, never lost.
A waiter leaving from the head may let those behind it in (readers behind a writer that gave up), so
the queue is handed on. Keys: see _permits.lua.

KEYS[1..4] pool hash, wait queue, waiter records, lease ends
ARGV[1]  waiter id
ARGV[2]  the waiter's owner token
ARGV[3]  fencing grace, ms
ARGV[4]  grant channel prefix
ARGV[5]  the key's name

Returns:
  {0, retryAfterMs}                removed (or already gone); it holds nothing. retryAfterMs: time left
                                   on the earliest-ending live lease, 0 when none
  {1, fencingToken, expiresAtMs}   it was already granted and holds a live lease
]]
--- @include "_handover"
--- @include "_permits"

redis.call('HDEL', KEYS[3], ARGV[1])
local wasQueued = redis.call('ZREM', KEYS[2], ARGV[1]) == 1
handOverPermits(KEYS, tonumber(ARGV[3]), ARGV[4], ARGV[5])
local weight, token, expiresAt = permitRecord(KEYS, ARGV[2])
if not wasQueued and weight and expiresAt > nowMs then
  return {1, token, expiresAt}
end
return {0, math.max(0, firstEnd(KEYS) or 0)}
