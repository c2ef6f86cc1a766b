import { constants } from 'node:os';

/**
 * Signals whose default action would end `keyholder run` (so leaving its command running without renewals):
 * they are passed on to the command's process group instead, as a shell passes Ctrl-C to its foreground
 * job, and the lock stays held until the command exits. One that arrives while the lock is being taken
 * gives up taking it. (SIGKILL and SIGSTOP cannot be caught: the guardian covers them; SIGSEGV, SIGBUS,
 * SIGFPE and SIGILL mean a broken process, whose death the guardian covers too.)
 */
export const PASSED_ON: readonly NodeJS.Signals[] = (
  [
    'SIGHUP',
    'SIGINT',
    'SIGQUIT',
    'SIGTERM',
    'SIGUSR1',
    'SIGUSR2',
    'SIGALRM',
    'SIGVTALRM',
    'SIGPROF',
    'SIGXCPU',
    'SIGXFSZ',
    'SIGPWR',
    'SIGSTKFLT',
    'SIGTRAP',
    'SIGABRT',
    'SIGSYS',
  ] as const
).filter((sig) => sig in constants.signals);

/** Ignored by default, but meant for the job: passed on once the command runs, never a reason to stop. */
export const PASSED_ON_QUIETLY: readonly NodeJS.Signals[] = ['SIGWINCH', 'SIGCONT'];

/**
 * SIGTSTP (Ctrl-Z) is not obeyed and not passed on: stopping the command while keyholder run keeps renewing
 * would leave the lock held by a process that does nothing, for as long as nobody resumes it; stopping
 * keyholder run too would let the lease run out under a command that resumes later. Stop the command
 * with SIGINT or SIGTERM instead. (SIGTTIN and SIGTTOU keep their default: keyholder run never reads the
 * terminal, and a handler would make a background write to a `tostop` terminal retry forever; if they do
 * stop it, the guardian stops the command by the safe deadline, as for SIGSTOP.)
 */
export const REFUSED: readonly NodeJS.Signals[] = ['SIGTSTP'];
