import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { FenceRegister, fencingMiddleware } from '../../src/fencing/index.js';
import type { ReplicaEvent } from './replica.js';

const REPLICA_SCRIPT = fileURLToPath(new URL('./replica.ts', import.meta.url));

export interface ElectionOptions {
  readonly keyholderUrl: string;
  readonly replicas: number;
  readonly ttlMs: number;
  readonly writeMs: number;
  /** How many times the current leader is stopped with SIGSTOP (one failover each). */
  readonly rounds: number;
}

export interface FailoverRound {
  readonly oldLeader: string;
  readonly oldToken: number;
  readonly newLeader: string;
  readonly newToken: number;
  /** From the old leader stopping to the new leader's election. */
  readonly failoverMs: number;
  /** Writes the old leader sent after it woke, all refused by the resource (409). */
  readonly staleWritesRejected: number;
  /** Writes the old leader got accepted after the new leader was elected: must be 0. */
  readonly staleWritesAccepted: number;
}

export interface ElectionResult {
  readonly rounds: FailoverRound[];
  /** Writes the resource accepted, in order; their fencing tokens never go down. */
  readonly acceptedWrites: number;
  readonly rejectedWrites: number;
  /** Elections seen in total (including the first one and any caused by a slow machine). */
  readonly elections: number;
}

/**
 * The shared resource the leader writes to: an HTTP endpoint behind the fencing middleware, so a
 * write with a token lower than one it has seen gets 409.
 */
async function startResource(): Promise<{ url: string; server: Server; accepted: Array<{ token: number; replica: string }>; rejected: number[] }> {
  const accepted: Array<{ token: number; replica: string }> = [];
  const rejected: number[] = [];
  const check = fencingMiddleware({ register: new FenceRegister(), resourceOf: () => 'db', onRejected: (_r, token) => rejected.push(token) });
  const server = createServer((req, res) => {
    check(req, res, () => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        const { replica } = JSON.parse(body) as { replica: string };
        accepted.push({ token: Number(req.headers['fencing-token']), replica });
        res.end('{}');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, accepted, rejected };
}

type Waiter = { match: (e: ReplicaEvent) => boolean; resolve: (e: ReplicaEvent) => void };

/** Starts the replicas, stops the leader `rounds` times, and measures each failover. */
export async function runElection(options: ElectionOptions): Promise<ElectionResult> {
  const resource = await startResource();
  const lockKey = `leader:db:${randomBytes(4).toString('hex')}`;
  const children = new Map<string, ChildProcess>();
  const events: ReplicaEvent[] = [];
  const waiters = new Set<Waiter>();
  const next = (match: (e: ReplicaEvent) => boolean, timeoutMs = 60_000) =>
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
    while (rounds.length < options.rounds) {
      // The current leader: the latest election, once it has written (it is really leading).
      const latest = await next((e) => elected(e) && !events.slice(events.indexOf(e) + 1).some(elected));
      if (!elected(latest)) throw new Error('unreachable');
      const leader = latest.replica;
      const since = events.indexOf(latest);
      const first = await next(
        (e) => events.indexOf(e) > since && e.replica === leader && ((e.event === 'write' && e.status === 200) || e.event === 'stepped-down'),
      );
      // On a starved machine the leader may lose its lease on its own before it writes: start again.
      if (first.event === 'stepped-down') continue;
      const mark = events.length;
      const child = children.get(leader)!;
      child.stdin!.write('pause\n');
      const pausing = await next((e) => events.indexOf(e) >= mark && e.replica === leader && (e.event === 'pausing' || e.event === 'stepped-down'));
      if (pausing.event === 'stepped-down') continue;
      // A new leader, and its first accepted write (the resource now holds a higher token).
      const successor = await next((e) => elected(e) && e.replica !== leader && events.indexOf(e) > events.indexOf(pausing));
      if (!elected(successor)) throw new Error('unreachable');
      await next((e) => e.event === 'write' && e.replica === successor.replica && e.status === 200 && events.indexOf(e) > events.indexOf(successor));
      const wokeAt = events.length;
      child.kill('SIGCONT');
      const down = await next((e) => e.event === 'stepped-down' && e.replica === leader && events.indexOf(e) >= wokeAt);
      const staleWrites = events
        .slice(wokeAt, events.indexOf(down) + 1)
        .filter((e): e is Extract<ReplicaEvent, { event: 'write' }> => e.event === 'write' && e.replica === leader && e.fencingToken === latest.fencingToken);
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
    return {
      rounds,
      acceptedWrites: resource.accepted.length,
      rejectedWrites: resource.rejected.length,
      elections: events.filter((e) => e.event === 'elected').length,
    };
  } finally {
    for (const child of children.values()) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    resource.server.closeAllConnections();
    await new Promise((r) => resource.server.close(r));
  }
}

/** True when the accepted writes' tokens never go down: one leader's writes at a time, in order. */
export function tokensNeverGoDown(tokens: readonly number[]): boolean {
  return tokens.every((t, i) => i === 0 || t >= tokens[i - 1]!);
}
