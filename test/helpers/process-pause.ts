import { vi } from 'vitest';

/**
 * Stops the process for `ms` (a busy loop): what SIGSTOP or a long GC pause looks like to it. Timers,
 * sockets and every other callback wait meanwhile.
 */
export function pauseProcess(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* the process is stopped */
  }
}

/** Makes `method` of `proto` pause the process once, after it has answered (before its caller goes on). */
export function pauseAfter<T extends object>(proto: T, method: keyof T, ms: number): void {
  const original = proto[method] as (...args: unknown[]) => Promise<unknown>;
  let paused = false;
  vi.spyOn(proto, method as never).mockImplementation(async function (this: unknown, ...args: unknown[]) {
    const answer = await original.apply(this, args);
    if (!paused) pauseProcess(ms);
    paused = true;
    return answer;
  } as never);
}
