/**
 * One replica of a replicated service that needs exactly one leader (the one that writes). It
 * campaigns for the lock `leader:db`: while it holds it, it renews the lease at a third of the TTL and
 * writes to the shared resource with its fencing token; while it does not, it waits for the lock to be
 * free (a blocking query on the lock, BlockingVacancyWatch) and tries to take it.
 *
 * One JSON line per event on stdout for whoever runs the replicas (the demo or the test). A `pause`
 * line on stdin makes the leader stop itself with SIGSTOP just before its next write (a GC pause
 * between deciding to write and writing); whoever runs it resumes it with SIGCONT.
 */
import { KeyholderClient } from '../lib/keyholder.js';
import { BlockingVacancyWatch } from './vacancy.js';

export type ReplicaEvent =
  | { event: 'elected'; replica: string; fencingToken: number; at: number }
  | { event: 'pausing'; replica: string; fencingToken: number; at: number }
  | { event: 'write'; replica: string; fencingToken: number; status: number; at: number }
  | { event: 'stepped-down'; replica: string; fencingToken: number; reason: string; at: number };

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};

const replica = env('REPLICA');
const lockKey = env('LOCK_KEY');
const ttlMs = Number(env('TTL_MS'));
const writeMs = Number(env('WRITE_MS'));
const resourceUrl = env('RESOURCE_URL');
const keyholder = new KeyholderClient(env('KEYHOLDER_URL'));
const watch = new BlockingVacancyWatch(keyholder);

let pauseArmed = false;
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  if (chunk.includes('pause')) pauseArmed = true;
});

const emit = (event: ReplicaEvent) => process.stdout.write(`${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Leads until the lease is lost; returns why. */
async function lead(ownerToken: string, fencingToken: number): Promise<string> {
  let lost: string | null = null;
  // Renew at a third of the TTL: two renewals can fail (a slow network, a busy store) before it ends.
  const renewer = setInterval(() => {
    void keyholder.renew(lockKey, ownerToken, ttlMs).then((answer) => {
      // not_owner: the lease ended (this process was stopped, or too slow). Anything else (unreachable,
      // 503) is not yet a loss: the next renewal may get through, and the lease has time left.
      if (!answer.ok && answer.code === 'not_owner') lost ??= 'lease lost (renew answered not_owner)';
    });
  }, Math.floor(ttlMs / 3));
  try {
    while (lost === null) {
      // The leader's work: a write to the shared resource, carrying the fencing token. A leader that
      // was stopped after deciding to write still sends it when it wakes: the resource must refuse it.
      if (pauseArmed) {
        pauseArmed = false;
        emit({ event: 'pausing', replica, fencingToken, at: Date.now() });
        // stdout to a pipe is synchronous on Linux: the line is out before the process stops.
        process.kill(process.pid, 'SIGSTOP');
      }
      const res = await fetch(`${resourceUrl}/state`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', 'fencing-token': String(fencingToken) },
        body: JSON.stringify({ replica, at: Date.now() }),
        signal: AbortSignal.timeout(5_000),
      }).catch(() => null);
      if (res !== null) {
        await res.body?.cancel();
        emit({ event: 'write', replica, fencingToken, status: res.status, at: Date.now() });
        // The resource has seen a higher token: someone else leads now, whatever the lease says.
        if (res.status === 409) lost = 'write refused: a newer leader has written';
      }
      if (lost === null) await sleep(writeMs);
    }
    return lost;
  } finally {
    clearInterval(renewer);
    // Best effort: hand the lock on at once if it is somehow still ours.
    await keyholder.release(lockKey, ownerToken);
  }
}

async function main(): Promise<void> {
  for (;;) {
    await watch.untilVacant(lockKey);
    const answer = await keyholder.acquire(lockKey, { ttlMs, holder: replica });
    if (!answer.ok) continue; // someone else won the race: back to watching
    const { ownerToken, fencingToken } = answer.value;
    emit({ event: 'elected', replica, fencingToken, at: Date.now() });
    const reason = await lead(ownerToken, fencingToken);
    emit({ event: 'stepped-down', replica, fencingToken, reason, at: Date.now() });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`replica ${replica}: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
