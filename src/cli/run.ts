import { constants, hostname } from 'node:os';
import { KeyholderError, type KeyholderClient, type Lease, LeaseLostError, LockHeldError, NotOwnerError } from '../client/index.js';
import { clientFrom, CONNECTION_HELP, EXIT, integer, keyAndTtl, LEASE_OPTIONS, parse, UsageError } from './args.js';
import { guard } from './guarded-command.js';
import type { Command } from './lock-commands.js';
import { PASSED_ON, PASSED_ON_QUIETLY, REFUSED } from './signals.js';

/** Left out of the command's environment: the command needs neither to do its work (--pass-api-key for the key). */
const SECRETS: readonly string[] = ['KEYHOLDER_API_KEY', 'KEYHOLDER_OWNER_TOKEN'];
/** The grace's default: time enough for most commands to shut down cleanly, never more than a quarter of the TTL. */
const DEFAULT_KILL_GRACE_MS = 5_000;

export const run: Command = {
  summary: 'run a command while holding a lock (renewed; the command is stopped if the lock is lost)',
  usage: `keyholder run --key KEY --ttl-ms N [--wait-ms N] [--holder LABEL] [--keep] [--kill-grace-ms N] [--on-release-request SIG]
              [--pass-api-key] -- COMMAND [ARGS...]
Takes the lock, runs COMMAND with KEYHOLDER_KEY and KEYHOLDER_FENCING_TOKEN in its environment, renews the
lease at about a third of its TTL while it runs, and releases the lock when it exits (with --keep, leaves
it held until its TTL runs out). The command runs in its own process group, watched by a guardian
process: it has stopped by the lease's safe deadline whatever happens to keyholder run. If no renewal is
confirmed in time, the group gets SIGTERM --kill-grace-ms before the safe deadline and SIGKILL at it; if
the lease is lost (force-released) or keyholder run dies, SIGTERM at once and SIGKILL after the grace.
SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM and the other signals that would end
keyholder run are passed on to the group (the lock is held until the command exits); SIGTSTP (Ctrl-Z) is
refused: a stopped command would hold the lock doing nothing. When an operator asks the holder to let go
(POST /v1/locks/KEY/release-request), the renewal that brings the request passes a signal to the group
(SIGTERM unless --on-release-request says otherwise); the lock is held until the command exits.
  --key KEY            the lock's name
  --ttl-ms N           lease length in milliseconds (how long a crashed run keeps others out)
  --wait-ms N          if held, wait up to N ms in the server's fair queue (default 0: give up at once)
  --holder LABEL       a label others see (default: host:pid)
  --keep               when the command ends, stop renewing but do not release: the lock stays held until
                       its TTL runs out. For a job run once per tick, name the tick in the key and keep it,
                       so a server that starts the same tick late finds it taken
  --kill-grace-ms N    time between SIGTERM and SIGKILL, taken out of the TTL (default 5000, at most a
                       quarter of --ttl-ms; at most half of --ttl-ms when given)
  --on-release-request SIG
                       the signal a release request passes to the command (default SIGTERM; "none": only
                       a line on stderr)
  --pass-api-key       pass KEYHOLDER_API_KEY on to the command (left out by default)${CONNECTION_HELP}
Exit: the command's own status (128+signal if a signal ended it); 75 the lock was not acquired (held, or
--wait-ms ran out); 76 the lease was lost and the command was stopped; 1 keyholder failed; 2 bad flags;
127 the command could not be started.
Cron: */5 * * * * keyholder run --key "report:$(date -u +\\%Y\\%m\\%dT\\%H\\%M)" --ttl-ms 600000 --keep -- ./report.sh`,

  async run(args, io) {
    const dashDash = args.indexOf('--');
    if (dashDash < 0) throw new UsageError('put the command after "--": keyholder run --key K --ttl-ms N -- COMMAND');
    const command = args.slice(dashDash + 1);
    if (command.length === 0 || command[0] === '') throw new UsageError('no command after "--"');
    const { values } = parse(args.slice(0, dashDash), {
      ...LEASE_OPTIONS,
      'wait-ms': { type: 'string' },
      holder: { type: 'string' },
      keep: { type: 'boolean' },
      'kill-grace-ms': { type: 'string' },
      'on-release-request': { type: 'string' },
      'pass-api-key': { type: 'boolean' },
    });
    const { key, ttlMs } = keyAndTtl(values);
    const waitMs = integer(values['wait-ms'], '--wait-ms', 0) ?? 0;
    const killGraceMs = killGrace(values['kill-grace-ms'], ttlMs);
    const onReleaseRequest = releaseRequestSignal(values['on-release-request']);
    const holder = values.holder ?? `${hostname()}:${process.pid}`.slice(0, 128);
    const client = clientFrom(values, io.env);
    const say = (line: string) => io.stderr(`keyholder run: ${line}\n`);
    // The release is retried for --retry-ms, like any call here; past it the lease ends by its TTL.
    const release = (lease: Lease) => releaseWithin(client, lease);

    // A signal while the lock is being taken: give up taking it (and release it if it was just granted).
    let signalled: NodeJS.Signals | undefined;
    const acquiring = new AbortController();
    let onSignal = (sig: NodeJS.Signals) => {
      if (PASSED_ON_QUIETLY.includes(sig)) return;
      signalled = sig;
      acquiring.abort(new Error(`${sig} while acquiring`));
    };
    const handler = (sig: NodeJS.Signals) => {
      if (REFUSED.includes(sig))
        say(`${sig} ignored: a stopped command would hold the lock doing nothing (stop it with SIGINT or SIGTERM)`);
      else onSignal(sig);
    };
    const handled = [...PASSED_ON, ...PASSED_ON_QUIETLY, ...REFUSED];
    for (const sig of handled) process.on(sig, handler);
    const removeHandlers = () => {
      for (const sig of handled) process.off(sig, handler);
    };

    let lease: Lease;
    try {
      lease = await acquireWaiting(client, key, { ttlMs, waitMs, holder, signal: acquiring.signal });
    } catch (err) {
      removeHandlers();
      if (signalled) return 128 + constants.signals[signalled];
      if (err instanceof LockHeldError) {
        say(`lock "${key}" is held by someone else${waitMs > 0 ? ` (waited ${waitMs} ms)` : ''}; not running the command`);
        return EXIT.notAcquired;
      }
      if (err instanceof KeyholderError) {
        say(`could not take lock "${key}": ${err.code}: ${err.message}`);
        return EXIT.failed;
      }
      // Granted, but lost before the grant reached us in time (this process was stopped or starved past
      // the lease's safe deadline): the command never ran, and the lease is gone, so it is a lost lease.
      if (err instanceof LeaseLostError) {
        say(`the lease on "${key}" was lost before the command started (${err.message}); not running the command`);
        return EXIT.leaseLost;
      }
      throw err;
    }
    if (signalled) {
      removeHandlers();
      await release(lease).catch(() => undefined);
      return 128 + constants.signals[signalled];
    }

    const childEnv: Record<string, string> = {};
    for (const [name, value] of Object.entries(io.env)) {
      if (value !== undefined && !SECRETS.includes(name)) childEnv[name] = value;
    }
    if (values['pass-api-key'] === true && io.env.KEYHOLDER_API_KEY) childEnv.KEYHOLDER_API_KEY = io.env.KEYHOLDER_API_KEY;
    childEnv.KEYHOLDER_KEY = key;
    childEnv.KEYHOLDER_FENCING_TOKEN = String(lease.fencingToken);

    const guarded = guard(command, childEnv, lease, killGraceMs);
    onSignal = (sig) => guarded.signal(sig);
    const onLost = () => {
      say(`${(lease.signal.reason as Error).message}; stopping the command (SIGTERM, SIGKILL after ${killGraceMs} ms at most)`);
      guarded.stop();
    };
    lease.signal.addEventListener('abort', onLost, { once: true });
    // Asked to let go (not evicted): the command decides; the lock is held until it exits.
    lease.onReleaseRequested((request) => {
      const why = request.reason === null ? '' : ` (${request.reason})`;
      say(
        `${request.by} asked the holder of "${key}" to let go${why}${onReleaseRequest ? `; passing ${onReleaseRequest} to the command` : ''}`,
      );
      if (onReleaseRequest) guarded.signal(onReleaseRequest);
    });
    const result = await guarded.exited;
    lease.signal.removeEventListener('abort', onLost);
    removeHandlers();

    if (result.type === 'guardian-gone') {
      say('the guardian process ended unexpectedly; the command was killed');
      if (!lease.lost) await release(lease).catch(() => undefined);
      return EXIT.failed;
    }
    if (result.stoppedBy !== undefined) {
      if (result.stoppedBy === 'deadline') say('no renewal was confirmed in time; the command was stopped before the lease could end');
      // Stopped for want of a confirmed renewal while the lease may still be ours: give it back.
      if (!lease.lost) await release(lease).catch(() => undefined);
      return EXIT.leaseLost;
    }
    if (lease.lost) {
      // Lost between the command's exit and the release: its last moments may have run unprotected.
      say(`${(lease.signal.reason as Error).message} as the command exited`);
      return EXIT.leaseLost;
    }
    if (values.keep === true) {
      // Renewals stop; the lease runs out at its TTL and nobody can take the key before that.
      lease.keep();
    } else {
      try {
        await release(lease);
      } catch (err) {
        say(`could not release lock "${key}" (it ends by itself when its TTL runs out): ${(err as Error).message}`);
      }
    }
    if (result.error) {
      say(`could not start ${command[0]}: ${result.error}`);
      return 127;
    }
    if (result.signal) return 128 + constants.signals[result.signal];
    return result.code ?? EXIT.failed;
  },
};

/**
 * The longest wait one acquire asks the server for: LOCK_MAX_WAIT_MS's default (a longer wait is a 400).
 * A longer --wait-ms queues again after each turn, until it runs out.
 */
const MAX_WAIT_TURN_MS = 60_000;

async function acquireWaiting(
  client: KeyholderClient,
  key: string,
  options: { ttlMs: number; waitMs: number; holder: string; signal: AbortSignal },
): Promise<Lease> {
  const waitUntil = performance.now() + options.waitMs;
  for (;;) {
    const left = Math.max(0, Math.ceil(waitUntil - performance.now()));
    const turn = Math.min(left, MAX_WAIT_TURN_MS);
    try {
      return await client.acquire(key, { ...options, waitMs: turn });
    } catch (err) {
      // The turn ran out with the lock still held, and the wait asked for has not: queue again.
      if (err instanceof LockHeldError && turn < left) continue;
      throw err;
    }
  }
}

/**
 * Gives the lease back, retried for the client's budget (--retry-ms) like any other call; past it
 * the lease ends by its TTL. (lease.release() would retry until the lease's own end: up to the whole TTL
 * after the command has finished.) Nothing to give back once the lease is lost.
 */
async function releaseWithin(client: KeyholderClient, lease: Lease): Promise<void> {
  if (lease.lost) return;
  lease.keep(); // no more renewals: the lease is given back here
  try {
    await client.release(lease.key, lease.ownerToken);
  } catch (err) {
    // Already not ours (expired, force-released, or an earlier attempt's answer was lost): nothing to give back.
    if (err instanceof NotOwnerError) return;
    throw err;
  }
}

/** --on-release-request: a signal name (with or without SIG), or "none"; undefined: pass nothing on. */
function releaseRequestSignal(value: string | undefined): NodeJS.Signals | undefined {
  if (value === undefined) return 'SIGTERM';
  if (value === 'none') return undefined;
  const upper = value.toUpperCase();
  const name = upper.startsWith('SIG') ? upper : `SIG${upper}`;
  if (!(name in constants.signals) || name === 'SIGKILL' || name === 'SIGSTOP' || REFUSED.includes(name as NodeJS.Signals)) {
    throw new UsageError(
      `--on-release-request: "${value}" is not a signal a command can be asked to stop with (e.g. SIGTERM, SIGINT, SIGUSR1, none)`,
    );
  }
  return name as NodeJS.Signals;
}

/**
 * --kill-grace-ms: the command gets SIGTERM this long before the lease's safe deadline, so the grace comes
 * out of the TTL. More than half the TTL would leave the renewal due at a third of it too little time to
 * be confirmed before a healthy command is stopped.
 */
function killGrace(value: string | undefined, ttlMs: number): number {
  const killGraceMs = integer(value, '--kill-grace-ms', 0);
  if (killGraceMs === undefined) return Math.min(DEFAULT_KILL_GRACE_MS, Math.floor(ttlMs / 4));
  if (killGraceMs > ttlMs / 2) {
    throw new UsageError(
      `--kill-grace-ms (${killGraceMs}) must be at most half of --ttl-ms (${ttlMs}): the command gets SIGTERM that long before the lease's safe deadline, and renewals need the rest`,
    );
  }
  return killGraceMs;
}
