/**
 * What `keyholder run` and its guardian process tell each other over their IPC channel. Deadlines are on
 * the host's monotonic clock (hostMonotonicMs), which both processes read alike.
 */

/** Why the guardian is stopping the command. */
export type StopReason =
  /** keyholder run saw the lease lost (force-released, renewal refused, or its safe deadline passed). */
  | 'lease-lost'
  /** No renewal was confirmed in time: the safe deadline minus the grace came without a new deadline. */
  | 'deadline'
  /** keyholder run is gone (killed, crashed): nothing renews the lease any more. */
  | 'run-gone';

export type ToGuardian =
  | {
      readonly type: 'start';
      readonly command: readonly string[];
      /** The command's whole environment (not argv: an argument shows in `ps`). */
      readonly env: Readonly<Record<string, string>>;
      readonly deadlineAt: number;
      readonly killGraceMs: number;
    }
  /** A renewal was confirmed: the lease's safe deadline moved to `deadlineAt`. */
  | { readonly type: 'deadline'; readonly deadlineAt: number }
  /** The lease is lost: stop the command now. */
  | { readonly type: 'stop' };

/** How the command ended. */
export interface CommandExit {
  readonly type: 'exit';
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The command could not be started (ENOENT, EACCES, ...). */
  readonly error?: string;
  readonly stoppedBy?: StopReason;
}

export type FromGuardian =
  { readonly type: 'spawned'; readonly pid: number } | { readonly type: 'stopping'; readonly reason: StopReason } | CommandExit;

/**
 * Milliseconds on CLOCK_MONOTONIC, which every process on the host shares (performance.now() counts from
 * each process's own start, so two processes cannot compare its values).
 */
export const hostMonotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;
