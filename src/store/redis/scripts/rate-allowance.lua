--[[
rate-allowance: hand an instance a batch of allowance (requests) from one API key's (or address's) rate
window, shared by every instance. The window is a counter that expires with the window: the allowance
handed out in it. An instance spends its batch in memory and asks again when it runs out, so the
count in Redis is never below what all instances have let through, and never above the limit.

KEYS[1]  the window's counter (a string; it expires when the window ends)
ARGV[1]  window length, ms (integer > 0)
ARGV[2]  most requests per window (integer > 0)
ARGV[3]  allowance wanted, requests (integer > 0)

Returns:
  {granted, windowLeftMs, handedOut}   granted: allowance handed to this instance (0 = the window is
                                       spent); windowLeftMs: time until the window ends (>= 1);
                                       handedOut: allowance handed out in this window, these included
]]
local handedOut = tonumber(redis.call('GET', KEYS[1]) or '0')
local granted = math.max(0, math.min(tonumber(ARGV[3]), tonumber(ARGV[2]) - handedOut))
if granted > 0 then
  handedOut = redis.call('INCRBY', KEYS[1], granted)
  if handedOut == granted then
    redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
  end
end
local left = redis.call('PTTL', KEYS[1])
if left < 1 then
  -- A spent window whose key is gone (or has no expiry): start it again on the next ask.
  left = 1
end
return {granted, left, handedOut}
