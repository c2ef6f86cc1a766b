/**
 * The guardian of a `keyholder run` command: a small process of its own (forked by run.ts) that starts the
 * command in its own process group and stops that group by the lease's safe deadline, whatever happens to
 * keyholder run. keyholder run sends it each new safe deadline as renewals are confirmed; if none comes in
 * time (keyholder run stopped with SIGSTOP, starved, or the store unreachable) the group gets SIGTERM at
 * the safe deadline minus the grace and SIGKILL at the safe deadline. If keyholder run dies (SIGKILL, a
 * crash), the IPC channel closes and the group is stopped at once. It runs in a session of its own, so a
 * terminal's signals (Ctrl-C, Ctrl-Z, hang-up) reach keyholder run, which decides, and not the guardian.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FromGuardian, hostMonotonicMs, type StopReason, type ToGuardian } from './guardian-messages.js';

/** How often to look whether the stopped command's process group is gone. */
const GROUP_POLL_MS = 20;
/** After SIGKILL, how long the kernel and init may take to clear the group before the exit is reported anyway. */
const REAP_WAIT_MS = 1_000;

let child: ChildProcess | undefined;
let deadlineAt = 0;
let killGraceMs = 0;
let stoppedBy: StopReason | undefined;
let killed = false;
let exiting = false;
let termTimer: NodeJS.Timeout | undefined;
let killTimer: NodeJS.Timeout | undefined;

const send = (message: FromGuardian) =>
  new Promise<void>((resolve) => {
    if (!process.connected || process.send === undefined) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });

/** Signals the command's whole group (a detached child leads its own); false once nobody is left in it. */
function signalGroup(signal: NodeJS.Signals | 0): boolean {
  if (child?.pid === undefined) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false; // ESRCH: the group is gone.
  }
}

/** SIGTERM at the safe deadline minus the grace, unless a later deadline comes first. */
function armDeadline(): void {
  clearTimeout(termTimer);
  if (stoppedBy !== undefined) return;
  termTimer = setTimeout(() => stop('deadline'), Math.max(0, deadlineAt - killGraceMs - hostMonotonicMs()));
}

/** SIGTERM now; SIGKILL when the grace runs out, and never later than the safe deadline. */
function stop(reason: StopReason): void {
  if (stoppedBy !== undefined || child === undefined || exiting) return;
  stoppedBy = reason;
  clearTimeout(termTimer);
  void send({ type: 'stopping', reason });
  terminateGroup();
}

/** SIGTERM to the group now; SIGKILL when the grace runs out, and never later than the safe deadline. */
function terminateGroup(): void {
  signalGroup('SIGTERM');
  const now = hostMonotonicMs();
  killTimer = setTimeout(
    () => {
      killed = true;
      signalGroup('SIGKILL');
    },
    Math.max(0, Math.min(deadlineAt, now + killGraceMs) - now),
  );
}

async function exited(code: number | null, signal: NodeJS.Signals | null, error?: string): Promise<void> {
  if (exiting) return; // a command that could not be started reports both 'error' and 'exit'
  exiting = true;
  // The command exited but left processes running in its group (a background job it did not wait for):
  // the lock is given back once the exit is reported, so they are stopped first, as for a lost lease.
  const leftovers = stoppedBy === undefined && error === undefined && signalGroup(0);
  if (leftovers) {
    clearTimeout(termTimer);
    terminateGroup();
  }
  if (stoppedBy !== undefined || leftovers) {
    // A grandchild may outlive the command: the group is stopped as a whole before the exit is reported.
    while (signalGroup(0) && !killed) await sleep(GROUP_POLL_MS);
    for (let waited = 0; waited < REAP_WAIT_MS && signalGroup(0); waited += GROUP_POLL_MS) await sleep(GROUP_POLL_MS);
  }
  clearTimeout(termTimer);
  clearTimeout(killTimer);
  // Then wait for keyholder run to close the channel: exiting now could let it see the channel close
  // before it reads this message (it may be stopped, or see this process exit first).
  await send({ type: 'exit', code, signal, ...(error === undefined ? {} : { error }), ...(stoppedBy === undefined ? {} : { stoppedBy }) });
}

process.on('message', (message: ToGuardian) => {
  switch (message.type) {
    case 'start': {
      if (child !== undefined) return;
      deadlineAt = message.deadlineAt;
      killGraceMs = message.killGraceMs;
      const [file, ...args] = message.command;
      // detached: its own process group, so that the whole of it can be stopped, a grandchild too.
      child = spawn(file as string, args, { stdio: 'inherit', detached: true, env: message.env });
      child.once('spawn', () => void send({ type: 'spawned', pid: child?.pid as number }));
      child.once('error', (err) => void exited(null, null, err.message));
      child.once('exit', (code, signal) => void exited(code, signal));
      armDeadline();
      return;
    }
    case 'deadline':
      if (message.deadlineAt > deadlineAt) {
        deadlineAt = message.deadlineAt;
        armDeadline();
      }
      return;
    case 'stop':
      stop('lease-lost');
      return;
  }
});

process.on('disconnect', () => {
  if (child === undefined || exiting) process.exit(0);
  stop('run-gone');
});
