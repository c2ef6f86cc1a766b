import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { requireTool, runProcess } from '../helpers/tools.js';

const GO_CLIENT = fileURLToPath(new URL('../../clients/go/', import.meta.url));

/** The Go tests that need a running server; each must pass, none may skip for want of its URL. */
const SERVER_TESTS = [
  'TestAcquireRenewReleaseOfALock',
  'TestAHeldLockIsA409WithRetryAfter',
  'TestWithLockRenewsTheLeaseAndReleasesIt',
  'TestAForceReleaseCancelsTheContext',
  'TestACutOffLeaseIsLostBeforeTheServerFreesIt',
  'TestA429IsRetriedNoSoonerThanRetryAfter',
  'TestSemaphorePermits',
  'TestInspectQueueListsTheWaitersHeadFirst',
  'TestInspectSemaphoreQueueGivesEachWaitersWeight',
  'TestForceReleaseLeaseLeavesANewerHolderAlone',
  'TestReleaseRequestReachesTheLeaseItNames',
  'TestInspectShowsTheReleaseRequest',
  'TestHistoryListsTheLeaseEventsOldestFirst',
  'TestAReplayedGrantsSafeDeadlineIsNotAfterTheServersEnd',
  'TestAWaitLongerThanTheTTLStillGivesALease',
  'TestAReleaseRetriedAfterACancelledOneReleases',
];

/**
 * clients/go (standard library only) against real servers: `go vet`, then `go test` with the servers'
 * URLs in the environment. One server runs open; the other allows one counted request per second, so
 * its 429s and Retry-After are real.
 */
describe('Go client against a running server', () => {
  let server: KeyholderProcess;
  let rateLimited: KeyholderProcess;

  beforeAll(async () => {
    requireTool('go', 'golang-go', ['version']);
    [server, rateLimited] = await Promise.all([
      // History on, for History's test; it changes nothing else a client sees.
      KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', HISTORY: 'on' } }),
      KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW_MS: '1000' } }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([server?.stop(), rateLimited?.stop()]);
  });

  /** Runs a go command in clients/go: never a toolchain or module download, build cache kept between runs. */
  function go(args: string[]) {
    return runProcess('go', args, {
      timeoutMs: 150_000,
      env: {
        ...process.env,
        GOTOOLCHAIN: 'local',
        GOPROXY: 'off',
        GOCACHE: process.env.GOCACHE ?? join(tmpdir(), 'keyholder-go-build'),
        GOPATH: process.env.GOPATH ?? join(tmpdir(), 'keyholder-go-path'),
        KEYHOLDER_TEST_URL: server.url,
        KEYHOLDER_TEST_RATE_LIMITED_URL: rateLimited.url,
      },
      cwd: GO_CLIENT,
    });
  }

  it('go vet and go test pass: locks, auto-renew, loss cancels the context, semaphores, queues, conditional force release, 409/429 Retry-After', async () => {
    // gofmt comes with go (golang-go); -l lists the files it would change.
    const unformatted = await runProcess('gofmt', ['-l', '.'], { cwd: GO_CLIENT });
    expect(unformatted.stdout + unformatted.stderr, 'files gofmt would change').toBe('');
    const vet = await go(['vet', './...']);
    expect(vet.stderr + vet.stdout).toBe('');
    expect(vet.status).toBe(0);

    const test = await go(['test', '-count=1', '-v', './...']);
    const output = test.stdout + test.stderr;
    expect(output).not.toMatch(/--- (FAIL|SKIP)/);
    expect(test.status, output).toBe(0);
    for (const name of SERVER_TESTS) expect(output).toContain(`--- PASS: ${name} `);
  }, 180_000);
});
