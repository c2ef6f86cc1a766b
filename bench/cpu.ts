import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on every mainstream Linux). */
const CLOCK_TICKS_PER_SECOND = (() => {
  const probe = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const value = Number(probe.stdout?.trim());
  return Number.isInteger(value) && value > 0 ? value : 100;
})();

/** User + system CPU seconds a process (all its threads) has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces; the fields after its closing parenthesis do not.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / CLOCK_TICKS_PER_SECOND;
}

/**
 * Read and write system calls a process has made so far (syscr + syscw of /proc/<pid>/io: read, write,
 * readv, writev and the like, on sockets and files alike); undefined where /proc/<pid>/io cannot be read.
 * Unlike CPU time, a count that the load on the machine does not change.
 */
export function ioCalls(pid: number): number | undefined {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const read = /^syscr: (\d+)$/m.exec(io)?.[1];
    const written = /^syscw: (\d+)$/m.exec(io)?.[1];
    return read === undefined || written === undefined ? undefined : Number(read) + Number(written);
  } catch {
    return undefined;
  }
}
