import { fork } from 'node:child_process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Lease } from '../client/index.js';
import { type CommandExit, type FromGuardian, hostMonotonicMs } from './guardian-messages.js';

/** The guardian program beside this file (guardian.js compiled, guardian.ts under tsx). */
const GUARDIAN = fileURLToPath(new URL(`./guardian${extname(fileURLToPath(import.meta.url))}`, import.meta.url));
/**
 * How often the lease's safe deadline is looked at and, when a renewal moved it, sent to the guardian
 * (the lease has no renewal event). A deadline sent late is an earlier one kept a little longer: safe.
 */
const DEADLINE_POLL_MS = 50;

export type GuardedExit =
  | CommandExit
  /** The guardian died (someone killed it): the command's group was SIGKILLed here instead. */
  | { readonly type: 'guardian-gone' };

export interface GuardedCommand {
  /** Passes a signal on to the command's process group (once it is started, if it is not yet). */
  signal(sig: NodeJS.Signals): void;
  /** The lease is lost: SIGTERM now, SIGKILL after the grace (never after the safe deadline). */
  stop(): void;
  readonly exited: Promise<GuardedExit>;
}

/**
 * Starts `command` under a guardian process that stops its process group by the lease's safe deadline
 * (SIGTERM at the deadline minus `killGraceMs`, SIGKILL at the deadline) unless told of a later one,
 * and at once if this process dies. See guardian.ts.
 */
export function guard(command: readonly string[], env: Record<string, string>, lease: Lease, killGraceMs: number): GuardedCommand {
  // Its own session (detached): a terminal's signals go to keyholder run, which decides what to pass on.
  // An empty environment: the guardian needs none, and the API key stays out of it.
  const guardian = fork(GUARDIAN, [], {
    detached: true,
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: {},
    execArgv: process.execArgv,
  });
  const deadline = () => hostMonotonicMs() + lease.remainingMs; // now read first: never later than the lease's
  let sentDeadlineAt = deadline();
  guardian.send({ type: 'start', command, env, deadlineAt: sentDeadlineAt, killGraceMs });

  let pgid: number | undefined;
  const pending: NodeJS.Signals[] = [];
  const signalGroup = (sig: NodeJS.Signals) => {
    try {
      if (pgid !== undefined) process.kill(-pgid, sig);
    } catch {
      // ESRCH: the group is already gone.
    }
  };
  const poll = setInterval(() => {
    if (lease.lost || !guardian.connected) return;
    const at = deadline();
    if (at > sentDeadlineAt + 1) {
      sentDeadlineAt = at;
      guardian.send({ type: 'deadline', deadlineAt: at });
    }
  }, DEADLINE_POLL_MS);

  let reported = false;
  const exited = new Promise<GuardedExit>((resolve) => {
    guardian.on('message', (message: FromGuardian) => {
      if (message.type === 'spawned') {
        pgid = message.pid;
        for (const sig of pending.splice(0)) signalGroup(sig);
      } else if (message.type === 'exit') {
        reported = true;
        resolve({ ...message, type: 'exit' });
      }
    });
    // The channel closes after its last message is read: a guardian that closes it without reporting the
    // command's exit has died, and nothing watches the deadline any more.
    guardian.once('disconnect', () => {
      if (reported) return;
      signalGroup('SIGKILL');
      resolve({ type: 'guardian-gone' });
    });
  });
  let backstop: NodeJS.Timeout | undefined;
  void exited.then(() => {
    clearInterval(poll);
    clearTimeout(backstop);
    if (guardian.connected) guardian.disconnect();
  });

  return {
    signal(sig) {
      if (pgid === undefined) pending.push(sig);
      else signalGroup(sig);
    },
    stop() {
      if (guardian.connected) guardian.send({ type: 'stop' });
      // The same SIGKILL from here too, in case the guardian cannot act (stopped, starved): a second SIGKILL
      // of a group that is already gone does nothing.
      backstop ??= setTimeout(() => signalGroup('SIGKILL'), Math.min(killGraceMs, lease.remainingMs));
    },
    exited,
  };
}
