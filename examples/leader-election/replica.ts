/**
 * One replica of a replicated service that needs exactly one leader (the one that appends to the shared
 * log). Three ways (MODE):
 *
 * - `none`:   no lock: every replica believes it leads and appends.
 * - `lock`:   it campaigns for the lock `leader:db`: while it holds it, it renews the lease at a third of
 *             the TTL and appends; while it does not, it waits for the lock to be free (a blocking query
 *             on the lock, BlockingVacancyWatch) and tries to take it.
 * - `fenced`: as `lock`, and each append carries the lease's fencing token, so the log refuses a
 *             deposed leader's append (409), which also tells it to step down.
 *
 * One JSON line per event on stdout for whoever runs the replicas (the demo or the test). A `pause`
 * line on stdin makes the leader stop itself with SIGSTOP just before its next append (a GC pause
 * between deciding to write and writing); whoever runs it resumes it with SIGCONT.
 */
import { KeyholderClient } from '../lib/keyholder.js';
import { BlockingVacancyWatch } from './vacancy.js';

export type ElectionMode = 'none' | 'lock' | 'fenced';

export type ReplicaEvent =
  | { event: 'elected'; replica: string; fencingToken: number; at: number }
  | { event: 'pausing'; replica: string; fencingToken: number; at: number }
  | { event: 'write'; replica: string; fencingToken: number | null; status: number; at: number }
  /** An append refused by the fence while the lock service still renewed this lease: two leases at once. */
  | { event: 'refused-while-held'; replica: string; fencingToken: number; at: number }
  | { event: 'stepped-down'; replica: string; fencingToken: number; reason: string; at: number };

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};

const mode = env('MODE') as ElectionMode;
const replica = env('REPLICA');
const lockKey = env('LOCK_KEY');
const ttlMs = Number(env('TTL_MS'));
const writeMs = Number(env('WRITE_MS'));
const resourceUrl = env('RESOURCE_URL');
const keyholder = new KeyholderClient(env('KEYHOLDER_URL'));
const watch = new BlockingVacancyWatch(keyholder);

let leading = false;
let pauseArmed = false;
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  // A pause is asked of the current leadership; one that ended before the line arrived ignores it.
  if (chunk.includes('pause') && leading) pauseArmed = true;
});

const emit = (event: ReplicaEvent) => process.stdout.write(`${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Appends one entry to the shared log; the HTTP status, or null without an answer. */
async function append(fencingToken: number | null): Promise<number | null> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (fencingToken !== null && mode === 'fenced') headers['fencing-token'] = String(fencingToken);
  const res = await fetch(`${resourceUrl}/log`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ replica }),
    signal: AbortSignal.timeout(5_000),
  }).catch(() => null);
  if (res === null) return null;
  await res.body?.cancel();
  emit({ event: 'write', replica, fencingToken, status: res.status, at: Date.now() });
  return res.status;
}

/** Leads until the lease is lost; returns why. */
async function lead(ownerToken: string, fencingToken: number): Promise<string> {
  let lost: string | null = null;
  leading = true;
  // Renew at a third of the TTL: two renewals can fail (a slow network, a busy store) before it ends.
  const renewer = setInterval(
    () => {
      void keyholder.renew(lockKey, ownerToken, ttlMs).then((answer) => {
        // not_owner: the lease ended (this process was stopped, or too slow). Anything else (unreachable,
        // 503) is not yet a loss: the next renewal may get through, and the lease has time left.
        if (!answer.ok && answer.code === 'not_owner') lost ??= 'lease lost (renew answered not_owner)';
      });
    },
    Math.floor(ttlMs / 3),
  );
  try {
    while (lost === null) {
      // A leader that was stopped after deciding to append still sends it when it wakes.
      if (pauseArmed) {
        pauseArmed = false;
        emit({ event: 'pausing', replica, fencingToken, at: Date.now() });
        // stdout to a pipe is synchronous on Linux: the line is out before the process stops.
        process.kill(process.pid, 'SIGSTOP');
      }
      // No answer: a leader stopped for longer than the log's keep-alive time wakes up on a connection
      // the log has closed meanwhile. It still means to append, so it sends again on a new one.
      const status = (await append(fencingToken)) ?? (await append(fencingToken));
      if (status === 409) {
        // The log has seen a higher token: someone else leads now, whatever the lease says. A working
        // lock has ended this lease already; if it still renews, the lock granted two leases at once.
        const renewed = await keyholder.renew(lockKey, ownerToken, ttlMs);
        if (renewed.ok) emit({ event: 'refused-while-held', replica, fencingToken, at: Date.now() });
        lost = 'append refused: a newer leader has appended';
      }
      if (lost === null) await sleep(writeMs);
    }
    return lost;
  } finally {
    clearInterval(renewer);
    leading = false;
    pauseArmed = false;
    // Best effort: hand the lock on at once if it is somehow still ours.
    await keyholder.release(lockKey, ownerToken);
  }
}

async function main(): Promise<void> {
  if (mode === 'none') {
    // Without a lock every replica believes it leads.
    for (;;) {
      await append(null);
      await sleep(writeMs);
    }
  }
  for (;;) {
    await watch.untilVacant(lockKey);
    const answer = await keyholder.acquire(lockKey, { ttlMs, holder: replica });
    if (!answer.ok) continue; // someone else won the race: back to watching
    const { ownerToken, fencingToken } = answer.value;
    emit({ event: 'elected', replica, fencingToken, at: Date.now() });
    const reason = await lead(ownerToken, fencingToken);
    emit({ event: 'stepped-down', replica, fencingToken, reason, at: Date.now() });
    // A deposed leader lets the others campaign before it does again: against a lock that says it is
    // free at once, campaigning straight away would be a busy loop.
    await sleep(writeMs);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`replica ${replica}: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
