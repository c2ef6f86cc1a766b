import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { BuyerEvent, Mode } from './buyer.js';

const BUYER_SCRIPT = fileURLToPath(new URL('./buyer.ts', import.meta.url));

export interface SaleOptions {
  readonly mode: Mode;
  readonly keyholderUrl: string;
  /** A PostgreSQL URL whose user may CREATE DATABASE; the sale runs in a database of its own, dropped after. */
  readonly postgresUrl: string;
  readonly buyers: number;
  readonly units: number;
  /** The lock's TTL; a paused holder is stopped for pauseMs, longer than this. */
  readonly ttlMs: number;
  /** Time a buyer spends between reading the stock and writing it (charging the card). */
  readonly workMs: number;
  /** How many holders to stop with SIGSTOP during the sale (modes with a lock). */
  readonly pauses: number;
  readonly pauseMs: number;
}

export interface SaleResult {
  readonly mode: Mode;
  readonly buyers: number;
  readonly units: number;
  /** Orders confirmed to buyers (rows in `orders`). */
  readonly ordersConfirmed: number;
  /** Orders beyond the stock: sold units that never existed. */
  readonly oversold: number;
  readonly finalUnits: number;
  readonly pauses: number;
  /** Writes applied after the writer's lease had ended (a later holder had written already). */
  readonly staleWritesApplied: number;
  /** Fenced reads or writes refused: a later lease had claimed the row. */
  readonly staleWritesRejected: number;
  /** Releases answered not_owner: the lease ran out during the critical section. */
  readonly lostLeases: number;
  /**
   * Refusals by the fence whose lease the lock service still took back as live: two leases at once.
   * 0 with a working lock, whatever the timing (a refusal means a later lease was granted).
   */
  readonly refusedWhileHeld: number;
  readonly durationMs: number;
}

/** Runs one flash sale: N buyer processes against one product, with paused holders in the lock modes. */
export async function runSale(options: SaleOptions): Promise<SaleResult> {
  const dbName = `flash_sale_${options.mode}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: options.postgresUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(options.postgresUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  const db = new pg.Client({ connectionString: databaseUrl });
  const children: ChildProcess[] = [];
  try {
    await db.connect();
    const product = `sku-${randomBytes(4).toString('hex')}`;
    await db.query(`
      CREATE TABLE inventory (product text PRIMARY KEY, units integer NOT NULL, fence bigint NOT NULL DEFAULT 0);
      CREATE TABLE orders (id bigserial PRIMARY KEY, buyer text NOT NULL, product text NOT NULL, units integer NOT NULL,
                           fencing_token bigint, placed_at timestamptz NOT NULL DEFAULT clock_timestamp());`);
    await db.query('INSERT INTO inventory (product, units) VALUES ($1, $2)', [product, options.units]);

    let started = performance.now();
    let ready = 0;
    const totals = { staleRejected: 0, lostLeases: 0, refusedWhileHeld: 0, pausesDone: 0 };
    // Pauses are spread over the sale, one every `spacing` write attempts, each buyer at most once; at
    // least one buyer is never paused, so the sale goes on while others are stopped.
    const pausing = options.mode !== 'none' && options.pauses > 0;
    if (pausing && options.pauses >= options.buyers) throw new Error('pauses must be fewer than buyers');
    const spacing = Math.max(1, Math.floor(options.units / (options.pauses + 1)));
    let attemptsSincePause = 0;
    let pausesArmed = 0;
    const armedBuyers = new Set<string>();
    const stopped = new Set<{ child: ChildProcess; fencingToken: number; laterWrote: boolean; timeUp: boolean }>();
    const resumeDue = () => {
      for (const paused of stopped) {
        if (!paused.timeUp || !paused.laterWrote) continue;
        stopped.delete(paused);
        paused.child.kill('SIGCONT');
        totals.pausesDone++;
      }
    };

    const exits = Array.from({ length: options.buyers }, (_, i) => {
      const buyer = `buyer-${i + 1}`;
      const child = spawn(process.execPath, ['--import', 'tsx', BUYER_SCRIPT], {
        env: {
          PATH: process.env.PATH ?? '',
          MODE: options.mode,
          BUYER: buyer,
          PRODUCT: product,
          TTL_MS: String(options.ttlMs),
          WORK_MS: String(options.workMs),
          KEYHOLDER_URL: options.keyholderUrl,
          DATABASE_URL: databaseUrl,
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(child);
      createInterface({ input: child.stdout }).on('line', (line) => {
        const event = JSON.parse(line) as BuyerEvent;
        switch (event.event) {
          case 'ready':
            if (++ready === options.buyers) {
              started = performance.now();
              for (const c of children) c.stdin!.write('go\n');
            }
            break;
          case 'attempt':
            attemptsSincePause++;
            // Only a write from a later lease counts: a buyer slower than its own TTL may still be
            // writing with an older token than the paused one's.
            for (const paused of stopped) {
              if (event.applied && event.fencingToken !== null && event.fencingToken > paused.fencingToken) paused.laterWrote = true;
            }
            resumeDue();
            if (pausing && pausesArmed < options.pauses && attemptsSincePause >= spacing && !armedBuyers.has(buyer)) {
              pausesArmed++;
              attemptsSincePause = 0;
              armedBuyers.add(buyer);
              child.stdin.write('pause\n');
            }
            break;
          case 'pausing': {
            // The buyer has stopped itself holding the lock. Wake it once its lease is long gone and a
            // later lease's write has been applied: then its write is stale for certain, however slow
            // the machine is.
            const paused = { child, fencingToken: event.fencingToken, laterWrote: false, timeUp: false };
            stopped.add(paused);
            setTimeout(() => {
              paused.timeUp = true;
              resumeDue();
            }, options.pauseMs);
            break;
          }
          case 'done':
            totals.staleRejected += event.staleRejected;
            totals.lostLeases += event.lostLeases;
            totals.refusedWhileHeld += event.refusedWhileHeld;
            break;
          case 'rejected':
            break;
        }
      });
      return new Promise<void>((resolve, reject) =>
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${buyer} exited with ${code}`)))),
      );
    });
    await Promise.all(exits);
    const durationMs = Math.round(performance.now() - started);

    const { rows: orderRows } = await db.query<{ fencing_token: string | null }>('SELECT fencing_token FROM orders ORDER BY id');
    let highest = -1;
    let staleWritesApplied = 0;
    for (const { fencing_token } of orderRows) {
      if (fencing_token === null) continue;
      const token = Number(fencing_token);
      if (token < highest) staleWritesApplied++;
      highest = Math.max(highest, token);
    }
    const { rows } = await db.query<{ units: number }>('SELECT units FROM inventory WHERE product = $1', [product]);
    const ordersConfirmed = orderRows.length;
    return {
      mode: options.mode,
      buyers: options.buyers,
      units: options.units,
      ordersConfirmed,
      oversold: Math.max(0, ordersConfirmed - options.units),
      finalUnits: rows[0]?.units ?? NaN,
      pauses: totals.pausesDone,
      staleWritesApplied,
      staleWritesRejected: totals.staleRejected,
      lostLeases: totals.lostLeases,
      refusedWhileHeld: totals.refusedWhileHeld,
      durationMs,
    };
  } finally {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      }
    }
    await db.end().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}
