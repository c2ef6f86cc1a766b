import { spawn } from 'node:child_process';
import { constants, hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyholderError, type Lease, LockHeldError } from '../client/index.js';
import { clientFrom, CONNECTION_HELP, CONNECTION_OPTIONS, EXIT, integer, parse, required, UsageError } from './args.js';
import type { Command } from './lock-commands.js';

/** Signals `run` passes on to its command (as a shell passes Ctrl-C to its foreground job). */
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** How often to look whether a stopped command's process group is gone. */
const GROUP_POLL_MS = 50;

export const run: Command = {
  summary: 'run a command while holding a lock (renewed; the command is stopped if the lock is lost)',
  usage: `keyholder run --key KEY --ttl-ms N [--wait-ms N] [--holder LABEL] [--keep] [--kill-grace-ms N] -- COMMAND [ARGS...]
Takes the lock, runs COMMAND with KEYHOLDER_KEY and KEYHOLDER_FENCING_TOKEN in its environment, renews the
lease at about a third of its TTL while it runs, and releases the lock when it exits (with --keep, leaves
it held until its TTL runs out). SIGINT, SIGTERM and
SIGHUP are passed on to the command's process group. If the lease is lost (force-released, or not renewed
in time), the command's whole process group gets SIGTERM, then SIGKILL after --kill-grace-ms.
  --key KEY            the lock's name
  --ttl-ms N           lease length in milliseconds (how long a crashed run keeps others out)
  --wait-ms N          if held, wait up to N ms in the server's fair queue (default 0: give up at once)
  --holder LABEL       a label others see (default: host:pid)
  --keep               when the command ends, stop renewing but do not release: the lock stays held until
                       its TTL runs out. For a job run once per tick, name the tick in the key and keep it,
                       so a server that starts the same tick late finds it taken
  --kill-grace-ms N    time between SIGTERM and SIGKILL when the lease is lost (default 5000)${CONNECTION_HELP}
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
      ...CONNECTION_OPTIONS,
      key: { type: 'string' },
      'ttl-ms': { type: 'string' },
      'wait-ms': { type: 'string' },
      holder: { type: 'string' },
      keep: { type: 'boolean' },
      'kill-grace-ms': { type: 'string' },
    });
    const key = required(values.key, '--key');
    const ttlMs = integer(required(values['ttl-ms'], '--ttl-ms'), '--ttl-ms', 1) ?? 0;
    const waitMs = integer(values['wait-ms'], '--wait-ms', 0) ?? 0;
    const killGraceMs = integer(values['kill-grace-ms'], '--kill-grace-ms', 0) ?? 5_000;
    const holder = values.holder ?? `${hostname()}:${process.pid}`.slice(0, 128);
    const client = clientFrom(values, io.env);
    const say = (line: string) => io.stderr(`keyholder run: ${line}\n`);

    // A signal while the lock is being taken: give up taking it (and release it if it was just granted).
    let signalled: NodeJS.Signals | undefined;
    const acquiring = new AbortController();
    let onSignal = (sig: NodeJS.Signals) => {
      signalled = sig;
      acquiring.abort(new Error(`${sig} while acquiring`));
    };
    const handler = (sig: NodeJS.Signals) => onSignal(sig);
    for (const sig of FORWARDED) process.on(sig, handler);
    const removeHandlers = () => {
      for (const sig of FORWARDED) process.off(sig, handler);
    };

    let lease: Lease;
    try {
      lease = await client.acquire(key, { ttlMs, waitMs, holder, signal: acquiring.signal });
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
      throw err;
    }
    if (signalled) {
      removeHandlers();
      await lease.release().catch(() => undefined);
      return 128 + constants.signals[signalled];
    }

    // Its own process group (detached), so that a lost lease stops the command and everything it started.
    const child = spawn(command[0] as string, command.slice(1), {
      stdio: 'inherit',
      detached: true,
      env: { ...io.env, KEYHOLDER_KEY: key, KEYHOLDER_FENCING_TOKEN: String(lease.fencingToken) },
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => resolve({ code: null, signal: null, error }));
    });
    const pgid = child.pid;
    const signalGroup = (sig: NodeJS.Signals | 0) => {
      if (pgid === undefined) return false;
      try {
        process.kill(-pgid, sig);
        return true;
      } catch {
        return false; // ESRCH: nobody left in the group.
      }
    };
    onSignal = (sig) => {
      signalled = sig;
      signalGroup(sig);
    };

    let killTimer: NodeJS.Timeout | undefined;
    let killed = false;
    let stopping = false;
    const onLost = () => {
      stopping = true;
      const reason = lease.signal.reason as Error;
      say(`${reason.message}; stopping the command (SIGTERM, SIGKILL after ${killGraceMs} ms)`);
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => {
        killed = true;
        signalGroup('SIGKILL');
      }, killGraceMs);
    };
    lease.signal.addEventListener('abort', onLost, { once: true });

    const result = await exited;
    lease.signal.removeEventListener('abort', onLost);
    removeHandlers();

    if (stopping) {
      // Wait until the whole group is gone (a grandchild too), SIGKILLing it when the grace runs out; after
      // SIGKILL, only as long as the kernel and init take to reap it.
      while (signalGroup(0) && !killed) await sleep(GROUP_POLL_MS);
      clearTimeout(killTimer);
      for (let i = 0; i < 20 && signalGroup(0); i++) await sleep(GROUP_POLL_MS);
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
        await lease.release();
      } catch (err) {
        say(`could not release lock "${key}" (it ends by itself when its TTL runs out): ${(err as Error).message}`);
      }
    }
    if (result.error) {
      say(`could not start ${command[0]}: ${result.error.message}`);
      return 127;
    }
    if (result.signal) return 128 + constants.signals[result.signal];
    return result.code ?? EXIT.failed;
  },
};
