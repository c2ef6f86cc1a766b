import { performance } from 'node:perf_hooks';

/**
 * Runs `run` and reports how it ended and how long it took (seconds): `ok` when it resolved, else
 * what `failed` makes of the error (which is then rethrown unchanged).
 */
export async function measure<T, R>(
  run: () => Promise<T>,
  ok: R,
  failed: (err: unknown) => R,
  report: (result: R, durationSeconds: number) => void,
): Promise<T> {
  const started = performance.now();
  let result = ok;
  try {
    return await run();
  } catch (err) {
    result = failed(err);
    throw err;
  } finally {
    report(result, (performance.now() - started) / 1000);
  }
}
