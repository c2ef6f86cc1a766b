import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { outOfTurnEntries, startLogResource } from './log-resource.js';
import type { ElectionMode, ReplicaEvent } from './replica.js';

const REPLICA_SCRIPT = fileURLToPath(new URL('./replica.ts', import.meta.url));

export interface ElectionOptions {
  readonly mode: ElectionMode;
  readonly keyholderUrl: string;
  readonly replicas: number;
  readonly ttlMs: number;
  readonly writeMs: number;
  /** How many times the current leader is stopped with SIGSTOP (one failover each; lock modes). */
  readonly rounds: number;
  /** After the rounds, run until the log holds at least this many entries. */
  readonly minEntries: number;
}

export interface FailoverRound {
  readonly oldLeader: string;
  readonly oldToken: number;
  readonly newLeader: string;
  readonly newToken: number;
  /** From the old leader stopping to the new leader's election. */
  readonly failoverMs: number;
  /** Appends the old leader sent after it woke that the log refused (409). */
  readonly staleWritesRejected: number;
  /** Appends the old leader got into the log after its successor's: the damage fencing prevents. */
  readonly staleWritesAccepted: number;
}

export interface ElectionResult {
  readonly mode: ElectionMode;
  readonly replicas: number;
  readonly rounds: FailoverRound[];
  readonly entries: number;
  /** Entries a leader appended after another leader had appended since its own last one (split brain). */
  readonly outOfTurn: number;
  readonly rejectedWrites: number;
  /** Appends refused by the fence while the lock service still renewed the lease: 0 with a working lock. */
  readonly refusedWhileHeld: number;
  /** Elections seen in total (including the first one and any caused by a slow machine). */
  readonly elections: number;
}

type Waiter = { match: (e: ReplicaEvent) => boolean; resolve: (e: ReplicaEvent) => void };

/** Starts the replicas, stops the leader `rounds` times, and measures each failover and the log's damage. */
export async function runElection(options: ElectionOptions): Promise<ElectionResult> {
  const resource = await startLogResource(options.mode === 'fenced');
  const lockKey = `leader:db:${randomBytes(4).toString('hex')}`;
  const children = new Map<string, ChildProcess>();
  const events: ReplicaEvent[] = [];
  const waiters = new Set<Waiter>();
  const next = (match: (e: ReplicaEvent) => boolean, timeoutMs = 120_000) =>
    new Promise<ReplicaEvent>((resolve, reject) => {
      const found = events.find(match);
      if (found) return resolve(found);
      const waiter = { match, resolve };
      waiters.add(waiter);
      setTimeout(() => {
        if (waiters.delete(waiter)) reject(new Error(`no such event within ${timeoutMs} ms; events: ${JSON.stringify(events.slice(-10))}`));
      }, timeoutMs).unref();
    });

  try {
    for (let i = 1; i <= options.replicas; i++) {
      const replica = `replica-${i}`;
      const child = spawn(process.execPath, ['--import', 'tsx', REPLICA_SCRIPT], {
        env: {
          PATH: process.env.PATH ?? '',
          MODE: options.mode,
          REPLICA: replica,
          LOCK_KEY: lockKey,
          TTL_MS: String(options.ttlMs),
          WRITE_MS: String(options.writeMs),
          RESOURCE_URL: resource.url,
          KEYHOLDER_URL: options.keyholderUrl,
        },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.set(replica, child);
      createInterface({ input: child.stdout }).on('line', (line) => {
        const event = JSON.parse(line) as ReplicaEvent;
        events.push(event);
        for (const w of waiters) {
          if (w.match(event)) {
            waiters.delete(w);
            w.resolve(event);
          }
        }
      });
    }

    const rounds: FailoverRound[] = [];
    const elected = (e: ReplicaEvent): e is Extract<ReplicaEvent, { event: 'elected' }> => e.event === 'elected';
    // Each round starts from an election after the one the round before started from: a round given
    // up (its leader stepped down on its own) waits for the next election instead of finding the same
    // events again, which would loop without ever yielding to the event loop.
    let startedFrom = -1;
    while (options.mode !== 'none' && rounds.length < options.rounds) {
      // The current leader: the latest election, once it has written (it is really leading).
      const latest = await next((e) => elected(e) && events.indexOf(e) > startedFrom && !events.slice(events.indexOf(e) + 1).some(elected));
      if (!elected(latest)) throw new Error('unreachable');
      startedFrom = events.indexOf(latest);
      const leader = latest.replica;
      const since = events.indexOf(latest);
      const first = await next(
        (e) =>
          events.indexOf(e) > since && e.replica === leader && ((e.event === 'write' && e.status === 200) || e.event === 'stepped-down'),
      );
      // On a starved machine the leader may lose its lease on its own before it writes: start again.
      if (first.event === 'stepped-down') continue;
      const mark = events.length;
      const child = children.get(leader)!;
      child.stdin!.write('pause\n');
      // A leader that stepped down before the line arrived ignores it: its step-down (even one reported
      // just before the line was sent) ends the round.
      const pausing = await next(
        (e) =>
          e.replica === leader &&
          ((e.event === 'pausing' && events.indexOf(e) >= mark) || (e.event === 'stepped-down' && events.indexOf(e) > since)),
      );
      if (pausing.event === 'stepped-down') continue;
      // A new leader, and its first accepted append (the log now holds a later leader's entry).
      const successor = await next((e) => elected(e) && e.replica !== leader && events.indexOf(e) > events.indexOf(pausing));
      if (!elected(successor)) throw new Error('unreachable');
      await next(
        (e) => e.event === 'write' && e.replica === successor.replica && e.status === 200 && events.indexOf(e) > events.indexOf(successor),
      );
      const wokeAt = events.length;
      child.kill('SIGCONT');
      const down = await next((e) => e.event === 'stepped-down' && e.replica === leader && events.indexOf(e) >= wokeAt);
      const staleWrites = events
        .slice(wokeAt, events.indexOf(down) + 1)
        .filter(
          (e): e is Extract<ReplicaEvent, { event: 'write' }> =>
            e.event === 'write' && e.replica === leader && e.fencingToken === latest.fencingToken,
        );
      rounds.push({
        oldLeader: leader,
        oldToken: latest.fencingToken,
        newLeader: successor.replica,
        newToken: successor.fencingToken,
        failoverMs: successor.at - pausing.at,
        staleWritesRejected: staleWrites.filter((e) => e.status === 409).length,
        staleWritesAccepted: staleWrites.filter((e) => e.status === 200).length,
      });
    }
    // Checked as each append is reported (the log has the entry before its writer hears back).
    if (resource.entries.length < options.minEntries)
      await next((e) => e.event === 'write' && resource.entries.length >= options.minEntries);
    return {
      mode: options.mode,
      replicas: options.replicas,
      rounds,
      entries: resource.entries.length,
      outOfTurn: outOfTurnEntries(resource.entries),
      rejectedWrites: resource.rejected.length,
      refusedWhileHeld: events.filter((e) => e.event === 'refused-while-held').length,
      elections: events.filter(elected).length,
    };
  } finally {
    for (const child of children.values()) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await resource.stop();
  }
}
