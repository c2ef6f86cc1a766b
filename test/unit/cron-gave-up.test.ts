import { describe, expect, it } from 'vitest';
import { gaveUpRetrying } from '../../examples/cron/schedule.js';

/**
 * The cron example counts a `keyholder run` that ran nothing as "lost before start" only when it gave up
 * retrying (what a starved host does); any other refusal is a failure the example must report.
 */
describe('examples/cron: which "could not take lock" is a give-up', () => {
  const said = (code: string) => `keyholder run: could not take lock "nightly": ${code}: whatever the server said\n`;

  it('a code the client retries (no answer, 503, 429, 408) is a give-up', () => {
    for (const code of ['unreachable', 'store_unavailable', 'overloaded', 'shutting_down', 'rate_limited', 'request_timeout'])
      expect(gaveUpRetrying(said(code)), code).toBe(true);
  });

  it('any other code, or another line, is not', () => {
    for (const code of ['unauthorized', 'forbidden', 'invalid_request', 'internal_error', 'no_such_code'])
      expect(gaveUpRetrying(said(code)), code).toBe(false);
    expect(gaveUpRetrying('keyholder run: lock "nightly" is held by someone else; not running the command\n')).toBe(false);
  });
});
