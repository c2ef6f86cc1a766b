--[[
history-append: one atomic step of a lease history batch for one or more quota shards. Not built on
_common.lua (it reads no lease): called with its key count first, as EVALSHA takes it.

Each list keeps its last events and lives at least `retention` past its last write (its TTL). Its TTL is
set when the list is created (RPUSH answers a length equal to what it pushed: the list was not there) and
when the caller asks (a flag per list); an index's likewise (ZADD added as many members as it then holds); the caller asks once per list per refresh period and sends a TTL of
retention + 2 refresh periods, so a list it writes without a refresh still outlives that write by the
retention (see redis-history.ts). Each index (a ZSET of list names by last write, on Redis's clock) deletes
the least recently written past the shard's cap. An index entry of a list its TTL dropped stays until it is
the oldest past the cap (it is: it was written before any live list), so the index never outgrows the cap
and needs no sweep of its own. Every key of a shard carries the shard's hash tag: on a Cluster a call holds
one shard (one slot); elsewhere one call holds several.

KEYS     per shard: its index (ZSET), then its lists (LIST), in the order of ARGV's groups
ARGV[1]  TTL of a list and an index, ms (retention + 2 refresh periods)
ARGV[2]  events kept per list
ARGV[3]  lists kept per shard index
ARGV[4..] per shard, a group: its count of lists n; its refresh flags, one character for the index and
         then one a list ("1": set the TTL even if the key was there, "0": only if this call created it);
         then n arguments, one a list: its events joined by line breaks, oldest first (no stored event
         holds a raw line break)

Returns:
  1   written
]]

local perKey, perShard = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Numbers passed to redis.call go as text made here once a call (or kept as sent): Redis 7.0 formats
-- each number it is passed with %.17g, some 2,200 instructions a number.
local a, k, ttl, keep = 4, 1, ARGV[1], '-' .. ARGV[2]
-- Ranks from Redis's clock, read once a call (not the top of each index, one call per shard): they go up
-- from call to call, whichever instance sent it, as each list takes the script longer than the 1 µs its
-- rank adds.
local time = redis.call('TIME')
-- Never a list's name: no key name is 65 dashes.
local WIDE = string.rep('-', 65)
-- A rank is the time in ms, as digit text: the ms, a point, then three digits of µs; each list of a
-- shard 1 µs after the one before.
local DIGIT = { [0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' }
local sec, usec = tonumber(time[1]), tonumber(time[2])
local startMs, startUs = sec * 1000 + math.floor(usec / 1000), usec % 1000
while k <= #KEYS do
  local index, lists, flags = KEYS[k], tonumber(ARGV[a]), ARGV[a + 1]
  a = a + 2
  -- The rank's ms as text (%d: an integer, not a %.17g), and its µs as three digits counted up.
  local ms = startMs
  local msText = string.format('%d', ms)
  local h, t, o = math.floor(startUs / 100), math.floor(startUs / 10) % 10, startUs % 10
  -- The index's new scores, sent in one ZADD per 500 lists (not one per list).
  local ranks, r, added = {}, 0, 0
  for i = k + 1, k + lists do
    local blob, len, pushed = ARGV[a], 0, 1
    local nl = string.find(blob, '\n', 1, true)
    if not nl then
      -- One event (the common case: a pair folded into its grant): pushed as sent, no split, no table.
      len = redis.call('RPUSH', KEYS[i], blob)
    else
      local from, events = 1, {}
      pushed = 0
      while true do
        pushed = pushed + 1
        if not nl then events[pushed] = string.sub(blob, from); break end
        events[pushed] = string.sub(blob, from, nl - 1)
        from = nl + 1
        nl = string.find(blob, '\n', from, true)
      end
      -- At most 1000 events per RPUSH: unpack's limit (some 8000) is never reached, whatever eventsPerKey is.
      for first = 1, pushed, 1000 do len = redis.call('RPUSH', KEYS[i], unpack(events, first, math.min(first + 999, pushed))) end
    end
    -- A new list (as long as what was pushed: the caller sends at most perKey events a list) always gets
    -- its TTL; a list that was there keeps the one it has unless the caller asks for a refresh (byte 49: "1").
    if len == pushed or string.byte(flags, i - k + 1) == 49 then redis.call('PEXPIRE', KEYS[i], ttl) end
    -- A trim only when the list outgrew its cap.
    if len > perKey then redis.call('LTRIM', KEYS[i], keep, '-1') end
    a = a + 1
    ranks[r + 1], ranks[r + 2], r = msText .. '.' .. DIGIT[h] .. DIGIT[t] .. DIGIT[o], KEYS[i], r + 2
    o = o + 1
    if o == 10 then
      o, t = 0, t + 1
      if t == 10 then
        t, h = 0, h + 1
        if h == 10 then
          h, ms = 0, ms + 1
          msText = string.format('%d', ms)
        end
      end
    end
    if r >= 1000 then added = added + redis.call('ZADD', index, unpack(ranks, 1, r)); r = 0 end
  end
  if r > 0 then added = added + redis.call('ZADD', index, unpack(ranks, 1, r)) end
  local held = redis.call('ZCARD', index)
  -- As many members as this call added: the index was not there (it held at least one member else).
  if held == added or string.byte(flags, 1) == 49 then
    redis.call('PEXPIRE', index, ttl)
    -- A member longer than zset-max-listpack-value (64) makes a sorted set a skiplist, which it stays. A
    -- small one (a listpack, up to 128 members) finds and moves a member by reading the others: a shard of
    -- some 60 keys written again spent 6 of its 10 µs a key in ZADD.
    redis.call('ZADD', index, '0', WIDE)
    redis.call('ZREM', index, WIDE)
  end
  local over = held - perShard
  -- Past the cap: the least recently written lists go (one DEL per 1000) and leave the index. Their names
  -- by rank (ZRANGE, then ZREMRANGEBYRANK), not by ZPOPMIN: that one answers each score too, formatted
  -- as text and made a Lua string, for nothing.
  while over > 0 do
    local n = math.min(over, 1000)
    local last = string.format('%d', n - 1)
    local victims = redis.call('ZRANGE', index, '0', last)
    redis.call('DEL', unpack(victims))
    redis.call('ZREMRANGEBYRANK', index, '0', last)
    over = over - n
  end
  k = k + lists + 1
end
return 1
