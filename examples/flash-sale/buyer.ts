/**
 * One buyer process of the flash sale. It places orders for one unit at a time until the product is
 * sold out, each a read-modify-write: read the stock, decide there is a unit to sell, charge the card
 * (WORK_MS), then write the new stock (the value read, minus one) and the order. Three ways (MODE):
 *
 * - `none`:   no lock.
 * - `lock`:   the same, inside the product's keyholder lock.
 * - `fenced`: inside the lock, and both the read and the write are fenced (src/fencing/sql.ts): the read
 *             claims the row with the lease's fencing token, and the write applies only if no higher
 *             token has claimed it since. The decision stays in this process (no stock check in SQL):
 *             the fence alone is what keeps a stale holder from writing.
 *
 * It talks to the sale's controller on stdio: one JSON line per event on stdout; `go` on stdin starts
 * it; a `pause` line on stdin makes it stop itself with SIGSTOP during its next critical section (after
 * reading the stock, before writing), and the controller resumes it with SIGCONT after longer than the
 * lock's TTL.
 */
import pg from 'pg';
import { fencedUpdate } from '../../src/fencing/index.js';
import { KeyholderClient } from '../lib/keyholder.js';

export type Mode = 'none' | 'lock' | 'fenced';

export type BuyerEvent =
  | { event: 'ready'; buyer: string }
  | { event: 'attempt'; buyer: string; fencingToken: number | null; applied: boolean }
  | { event: 'pausing'; buyer: string; fencingToken: number }
  | { event: 'rejected'; buyer: string; fencingToken: number; highestSeen: number }
  | {
      event: 'done';
      buyer: string;
      orders: number;
      staleRejected: number;
      lostLeases: number;
      refusedWhileHeld: number;
      unavailable: number;
    };

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};

const mode = env('MODE') as Mode;
const buyer = env('BUYER');
const product = env('PRODUCT');
const ttlMs = Number(env('TTL_MS'));
const workMs = Number(env('WORK_MS'));
const keyholder = new KeyholderClient(env('KEYHOLDER_URL'));
const db = new pg.Client({ connectionString: env('DATABASE_URL') });

let pauseArmed = false;
let go: () => void = () => undefined;
const started = new Promise<void>((resolve) => (go = resolve));
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  if (chunk.includes('pause')) pauseArmed = true;
  if (chunk.includes('go')) go();
});

const emit = (event: BuyerEvent) => process.stdout.write(`${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readUnits(): Promise<number> {
  const { rows } = await db.query<{ units: number }>('SELECT units FROM inventory WHERE product = $1', [product]);
  return rows[0]?.units ?? 0;
}

/** The classic read-check-write: the new stock was computed from the value read before. */
async function plainWrite(unitsRead: number, fencingToken: number | null): Promise<void> {
  await db.query('BEGIN');
  await db.query('UPDATE inventory SET units = $1 WHERE product = $2', [unitsRead - 1, product]);
  await db.query('INSERT INTO orders (buyer, product, units, fencing_token) VALUES ($1, $2, 1, $3)', [buyer, product, fencingToken]);
  await db.query('COMMIT');
}

/**
 * The fenced read: claims the row with this lease's fencing token and reads the stock, in one
 * statement. From here on a later lease's claim (a higher token) makes this lease's write fail.
 */
async function fencedRead(fencingToken: number): Promise<number | 'stale'> {
  const claim = await fencedUpdate(db, {
    table: 'inventory',
    key: { column: 'product', value: product },
    fencingToken,
    set: 'units = units',
  });
  if (claim.applied) return (claim.rows[0] as { units: number }).units;
  if (claim.reason === 'stale_token') {
    emit({ event: 'rejected', buyer, fencingToken, highestSeen: claim.highestSeen });
    return 'stale';
  }
  throw new Error(`product ${product} is missing`);
}

/** The fenced write: the stock computed from the read, applied only if no later lease has claimed the row. */
async function fencedWrite(unitsRead: number, fencingToken: number): Promise<'applied' | 'stale'> {
  await db.query('BEGIN');
  const result = await fencedUpdate(db, {
    table: 'inventory',
    key: { column: 'product', value: product },
    fencingToken,
    set: 'units = $1',
    values: [unitsRead - 1],
  });
  if (result.applied) {
    await db.query('INSERT INTO orders (buyer, product, units, fencing_token) VALUES ($1, $2, 1, $3)', [buyer, product, fencingToken]);
  } else if (result.reason === 'stale_token') {
    emit({ event: 'rejected', buyer, fencingToken, highestSeen: result.highestSeen });
  }
  await db.query('COMMIT');
  return result.applied ? 'applied' : 'stale';
}

async function main(): Promise<void> {
  await db.connect();
  // Every buyer starts at once, when all are connected: the sale measures selling, not process start-up.
  emit({ event: 'ready', buyer });
  await started;
  const lockKey = `product:${product}`;
  let orders = 0;
  let staleRejected = 0;
  let lostLeases = 0;
  let refusedWhileHeld = 0;
  let unavailable = 0;
  for (;;) {
    let grant: { ownerToken: string; fencingToken: number } | null = null;
    if (mode !== 'none') {
      const answer = await keyholder.acquire(lockKey, { ttlMs, holder: buyer, waitMs: 10_000 });
      if (!answer.ok) {
        // Held past our wait, or the service could not answer: nothing is granted; try again.
        if (answer.code !== 'lock_held') unavailable++;
        continue;
      }
      grant = answer.value;
    }

    let stale = false;
    const units = mode === 'fenced' && grant ? await fencedRead(grant.fencingToken) : await readUnits();
    if (units === 'stale') {
      stale = true;
    } else if (units < 1) {
      if (grant) await keyholder.release(lockKey, grant.ownerToken);
      break;
    } else {
      if (pauseArmed && grant) {
        pauseArmed = false;
        emit({ event: 'pausing', buyer, fencingToken: grant.fencingToken });
        // stdout to a pipe is synchronous on Linux: the controller has the line before we stop.
        process.kill(process.pid, 'SIGSTOP');
      }
      await sleep(workMs); // charge the card, reserve the parcel, ...

      if (mode === 'fenced' && grant) {
        stale = (await fencedWrite(units, grant.fencingToken)) === 'stale';
      } else {
        await plainWrite(units, grant?.fencingToken ?? null);
      }
      if (!stale) orders++;
      if (mode !== 'none') emit({ event: 'attempt', buyer, fencingToken: grant?.fencingToken ?? null, applied: !stale });
    }
    if (stale) staleRejected++;
    if (grant) {
      const released = await keyholder.release(lockKey, grant.ownerToken);
      if (!released.ok && released.code === 'not_owner') lostLeases++;
      // Refused by the fence, yet the lock service still took the lease back as ours: a later lease was
      // granted while this one lived. A working lock never does that; this counts it when one does.
      else if (released.ok && stale) refusedWhileHeld++;
    }
    // After a refusal, a jittered pause: holders granted at once (a broken lock) would otherwise keep
    // overtaking each other's claims.
    if (stale) await sleep(Math.random() * workMs * 2);
  }
  emit({ event: 'done', buyer, orders, staleRejected, lostLeases, refusedWhileHeld, unavailable });
  await db.end();
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`buyer ${buyer}: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
