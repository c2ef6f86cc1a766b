import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * CPU placement for an A/B of two server processes on a small machine (`--pin`). Left to the scheduler,
 * each instance shares a core with Redis, the load worker or the other instance as it happens to be
 * placed; pinned, both instances run on the same CPU set and Redis and the load worker on the other, so
 * placement is the same for both. On a host that other work keeps busy, pinned processes cannot move to
 * the idler core and pairs/s fall several-fold: pin on a quiet host only.
 */
export interface Placement {
  /** The CPUs both servers of the A/B run on (taskset list syntax). */
  readonly servers: string;
  /** The CPUs Redis and the load worker run on. */
  readonly rest: string;
}

/** The placement on this machine; null where there is nothing to split (one CPU) or no taskset. */
export function placement(): Placement | null {
  const cpus = availableParallelism();
  if (cpus < 2 || spawnSync('taskset', ['--version']).status !== 0) return null;
  // Half the CPUs each (1 and 1 on a 2-core host): the server under test is the one CPU-bound process.
  const half = Math.floor(cpus / 2);
  const list = (from: number, to: number) => (to - from > 1 ? `${from}-${to - 1}` : String(from));
  return { servers: list(cpus - half, cpus), rest: list(0, cpus - half) };
}

/** Pins every thread of `pid` to `cpus`; the threads it starts later inherit it. Throws if it cannot. */
export function pin(pid: number, cpus: string): void {
  const run = spawnSync('taskset', ['--all-tasks', '--cpu-list', '--pid', cpus, String(pid)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`taskset ${cpus} ${pid} failed: ${run.stderr || run.error?.message}`);
}
