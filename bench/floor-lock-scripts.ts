/**
 * The lock floor's two scripts (floor-lock-server.ts), apart so that script-costs.ts can time them in
 * Redis beside keyholder's. The lock is a string (SET NX PX) with a fencing counter beside it (INCR),
 * both under one hash tag: KEYS[1] the lock, KEYS[2] the counter; ARGV[1] the owner token, ARGV[2] the
 * lease, ms. Acquire returns the new fencing token (0: held); release returns 1 (0: not the owner).
 */
export const FLOOR_ACQUIRE = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`;
export const FLOOR_RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;
