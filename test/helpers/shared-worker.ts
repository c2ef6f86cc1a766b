import { afterAll, vi } from 'vitest';

/**
 * Setup of the files that share a worker (vitest.config.ts, project `shared`): what one file changes of
 * the process must not reach the next. A spy left on performance.now, a pino prototype or the timers
 * would otherwise run under every later file of that worker.
 */
afterAll(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});
