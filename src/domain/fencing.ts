/**
 * The fencing token rule shared by every store: strictly above the last token issued for the key, and
 * never below the store's clock in microseconds. The clock floor is what keeps tokens increasing when
 * the per-key counter is lost (data loss, restart, expiry of an idle key's state). The Redis store's
 * Lua (_handover.lua, grantLease) applies the same rule on the Redis clock.
 */
export function nextFencingToken(lastToken: number, nowMs: number): number {
  return Math.max(lastToken + 1, Math.floor(nowMs * 1000));
}
