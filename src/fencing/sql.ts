/**
 * Fenced writes for SQL databases: the protected row keeps the highest fencing token that has written
 * to it, and a write carrying a lower token changes nothing. This is the check that makes a lock safe
 * for correctness: a holder that was paused (GC, SIGSTOP, a slow network) past its lease and wakes up
 * still believing it holds the lock is refused by the resource itself.
 *
 * The pattern, in one statement (PostgreSQL; any SQL database with atomic single-row UPDATE works):
 *
 *   ALTER TABLE inventory ADD COLUMN fence bigint NOT NULL DEFAULT 0;
 *
 *   UPDATE inventory SET units = units - $1, fence = $3
 *    WHERE product = $2 AND fence <= $3 AND units >= $1;
 *
 * Two rules make it safe, and both matter:
 * 1. `fence <= $token` and `fence = $token`: the row remembers the highest token and refuses lower ones.
 *    Equal is accepted so one grant may write several times; a stale holder's token is always lower
 *    than the one granted after its lease ended (keyholder's fencing tokens only go up).
 * 2. The condition the decision rests on (`units >= $1`) is in the same WHERE, evaluated by the
 *    database at write time. A value read earlier and written back (`SET units = $readValue - 1`) is a
 *    lost update waiting to happen, fenced or not: the next holder may have read before the stale write.
 *    When the decision cannot go in the WHERE (it rests on a call elsewhere), fence the read instead:
 *    claim the row and read it in one statement (`set: 'units = units'` here, which sets only the fence
 *    and returns the row), decide, then write with the same token. A later holder's claim raises the
 *    fence, so the write applies only if nobody has claimed the row since the read.
 *
 * MySQL/MariaDB and SQLite forms of the same statement: docs/safety.md.
 *
 * No dependency on a driver: anything with `query(text, values)` returning `rowCount`/`rows` fits
 * (pg's Client and Pool do).
 */

/** The slice of a database client this module needs (node-postgres' Client, Pool and PoolClient fit). */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: unknown[] }>;
}

/** The SQL type of a fence column: keyholder's fencing tokens are up to 2^53 - 1 (microsecond clock). */
export const FENCE_COLUMN_TYPE = 'bigint NOT NULL DEFAULT 0';

export interface FencedUpdate {
  /** Table name (quoted here; pass it unquoted). */
  readonly table: string;
  /** The column and value that pick the one protected row. */
  readonly key: { readonly column: string; readonly value: unknown };
  /** The fencing token of the lease the caller holds. */
  readonly fencingToken: number;
  /** The SET list without the fence, with $1..$n for `values`: `units = units - $1`. */
  readonly set: string;
  /** Extra conditions the write needs, with $1..$n for `values`: `units >= $1`. */
  readonly where?: string;
  readonly values?: readonly unknown[];
  /** The fence column (default `fence`). */
  readonly fenceColumn?: string;
}

export type FencedWriteResult =
  | { readonly applied: true; readonly rows: readonly unknown[] }
  /** A write with a higher token has been applied: the caller's lease is over; it must not retry. */
  | { readonly applied: false; readonly reason: 'stale_token'; readonly highestSeen: number }
  /** The token was fine but `where` did not hold (sold out, say), or the row does not exist. */
  | { readonly applied: false; readonly reason: 'condition_failed' };

/** Quotes an SQL identifier ("a""b"), so a table or column name can never become SQL. */
export function quoteIdent(name: string): string {
  if (name.length === 0 || name.includes('\0')) throw new Error(`not an SQL identifier: ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

/** Builds the fenced UPDATE: the caller's SET and WHERE, plus the fence check and the fence write. */
export function fencedUpdateSql(spec: FencedUpdate): { text: string; values: unknown[] } {
  const values = [...(spec.values ?? [])];
  const keyParam = `$${values.push(spec.key.value)}`;
  const tokenParam = `$${values.push(spec.fencingToken)}`;
  const fence = quoteIdent(spec.fenceColumn ?? 'fence');
  const extra = spec.where === undefined ? '' : ` AND (${spec.where})`;
  return {
    text:
      `UPDATE ${quoteIdent(spec.table)} SET ${spec.set}, ${fence} = ${tokenParam} ` +
      `WHERE ${quoteIdent(spec.key.column)} = ${keyParam} AND ${fence} <= ${tokenParam}${extra} RETURNING *`,
    values,
  };
}

/**
 * Runs a fenced UPDATE on one row and says whether it applied and, if not, why. The reason comes from
 * a second read: the fence only goes up, so a fence above the caller's token at that read means the
 * token was already stale when the update was refused (or has become stale since: either way the
 * caller no longer holds the lock and must stop).
 */
export async function fencedUpdate(db: Queryable, spec: FencedUpdate): Promise<FencedWriteResult> {
  if (!Number.isSafeInteger(spec.fencingToken) || spec.fencingToken < 0) {
    throw new RangeError(`fencingToken must be a non-negative safe integer, got ${spec.fencingToken}`);
  }
  const { text, values } = fencedUpdateSql(spec);
  const result = await db.query(text, values);
  if ((result.rowCount ?? 0) > 0) return { applied: true, rows: result.rows };
  const fence = quoteIdent(spec.fenceColumn ?? 'fence');
  const now = await db.query(`SELECT ${fence} AS fence FROM ${quoteIdent(spec.table)} WHERE ${quoteIdent(spec.key.column)} = $1`, [
    spec.key.value,
  ]);
  const row = now.rows[0] as { fence: string | number } | undefined;
  const highestSeen = row === undefined ? 0 : Number(row.fence);
  if (highestSeen > spec.fencingToken) return { applied: false, reason: 'stale_token', highestSeen };
  return { applied: false, reason: 'condition_failed' };
}
