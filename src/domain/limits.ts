/**
 * The bounds the lock rules enforce. Their values (and why each default is what it is) come from the
 * configuration schema in src/config.ts.
 */
export interface LeaseLimits {
  readonly minTtlMs: number;
  readonly maxTtlMs: number;
  readonly maxWaitMs: number;
  /** Longest lock-delay a caller may ask for; absent means 0 (lock-delay off). */
  readonly maxLockDelayMs?: number;
  readonly maxWaitersPerKey: number;
  readonly maxWaitersPerInstance: number;
  /** Callers of one namespace one instance keeps waiting at once; absent means the instance cap alone. */
  readonly maxWaitersPerNamespace?: number;
  /** Most locks one namespace may hold at once; 0 or absent means no cap. */
  readonly maxHeldLocksPerNamespace?: number;
}
