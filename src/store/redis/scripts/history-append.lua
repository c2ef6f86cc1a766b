--[[
history-append: one atomic step of a lease history batch for one or more quota shards. Not built on
_common.lua (it reads no lease): called with its key count first, as EVALSHA takes it.

Each list keeps its last events (a lease's lock-delay, holder and grant time in the lines that go are
handed on to the lease's first line kept: see carry) and lives at least `retention` past its last write (its TTL). Its TTL is
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

-- Whether a line leaves its lease going: a grant with no release folded in (no `|r`), a renewal, a
-- release request (the letters of KIND_CODES in history.ts). No text of a line holds a raw `|`, so `|x`
-- is always the start of field x.
local function goesOn(line)
  local kind = string.byte(line, 1)
  if kind == 103 then return not string.find(line, '|r', 1, true) end -- 'g'
  return kind == 110 or kind == 113 -- 'n', 'q'
end

-- Whether a line names the lease: its id field or its fencing token field, whole (`lease`, `token`: the
-- fields with their `|` in front and one after, or nil).
local function names(line, lease, token)
  local whole = line .. '|'
  return (lease and string.find(whole, lease, 1, true)) or (token and string.find(whole, token, 1, true))
end

-- The facts a line that goes knows of its lease and its later lines may not (as carryLeaseFacts in
-- history.ts, which says why): its lock-delay (`|d`, recorded with the grant alone), its holder label
-- (`|h...`, `|H`: none) and its grant time (a grant's own time, its line's head; a line that took it on
-- holds it as `|a`). Nil when it holds none, or is in the JSON form (written by older versions: it hands
-- nothing on) or ends its lease.
local function factsOf(line)
  local kind = string.byte(line, 1)
  if kind == 123 or not goesOn(line) then return nil end
  local d = string.find(line, '|d', 1, true) and string.match(line, '|d([^|]*)')
  local a = string.find(line, '|a', 1, true) and string.match(line, '|a([^|]*)')
  if kind == 103 then a = string.match(line, '^g([^|]*)') end
  local h = string.match(line, '|(h[^|]*)') or (string.find(line, '|H', 1, true) and 'H')
  if not d and not a and not h then return nil end
  return { d = d, a = a, h = h }
end

-- `later` (the lease's next line, not a grant) with the facts it lacks: the lock-delay only if it leaves
-- the lease going (after a release there is none); nil if it takes none on.
local function withFacts(later, facts)
  local out = later
  if facts.d and goesOn(later) and not string.find(later, '|d', 1, true) then out = out .. '|d' .. facts.d end
  if facts.h and not string.find(later, '|h', 1, true) and not string.find(later, '|H', 1, true) then out = out .. '|' .. facts.h end
  if facts.a and not string.find(later, '|a', 1, true) then out = out .. '|a' .. facts.a end
  if out == later then return nil end
  return out
end

-- The lines `gone` (oldest first) leave the list: a lease's facts (factsOf) among them go on to the lease's
-- next line, and so on to the lease's first line kept, set anew there (LSET). Never past another lease's
-- grant (a lock's leases follow one another: that grant came after this lease ended, so a key whose leases
-- all expire reads one line, not the list). Work only for a line that goes with facts of its lease.
local function carry(list, gone)
  local kept
  for j = 1, #gone do
    local facts = factsOf(gone[j])
    if facts then
      local line = gone[j]
      local l, f = string.match(line, '|l([^|]*)'), string.match(line, '|f([^|]*)')
      local lease, token = l and ('|l' .. l .. '|'), f and ('|f' .. f .. '|')
      -- The lease's next line: 0 none, else its place (k) among the lines gone after this one (`inGone`), or kept.
      local at, inGone, stop = 0, true, false
      for k = j + 1, #gone do
        if names(gone[k], lease, token) then at = k; break end
        if string.byte(gone[k], 1) == 103 then stop = true; break end
      end
      if at == 0 and not stop then
        inGone = false
        -- Mostly the head (its release or renewal, or the next lease's grant): that line first, the rest
        -- if need be.
        kept = kept or { redis.call('LINDEX', list, '0') }
        local k = 1
        while true do
          local later = kept[k]
          if later == nil and k == 2 and #kept == 1 then
            local rest = redis.call('LRANGE', list, '1', '-1')
            for r = 1, #rest do kept[1 + r] = rest[r] end
            later = kept[k]
          end
          if later == nil then break end
          if names(later, lease, token) then at = k; break end
          if string.byte(later, 1) == 103 then break end
          k = k + 1
        end
      end
      if at > 0 then
        local later = inGone and gone[at] or kept[at]
        local changed = string.byte(later, 1) ~= 103 and withFacts(later, facts)
        if changed then
          if inGone then
            gone[at] = changed
          else
            kept[at] = changed
            redis.call('LSET', list, string.format('%d', at - 1), changed)
          end
        end
      end
    end
  end
end
-- Numbers passed to redis.call go as text made here once a call (or kept as sent): Redis 7.0 formats
-- each number it is passed with %.17g, some 2,200 instructions a number.
local a, k, ttl = 4, 1, ARGV[1]
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
    -- A trim only when the list outgrew its cap: the lines that go are popped (not trimmed unseen), so a
    -- lease's facts among them are handed on (carry).
    if len > perKey then
      local cut = len - perKey
      if cut == 1 then
        -- One line (a list at its cap written again, the common trim): LPOP's plain answer, looked at
        -- for facts to hand on before any table is made.
        local line = redis.call('LPOP', KEYS[i])
        if factsOf(line) then carry(KEYS[i], { line }) end
      else
        carry(KEYS[i], redis.call('LPOP', KEYS[i], string.format('%d', cut)))
      end
    end
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
