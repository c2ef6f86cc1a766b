import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostileServers } from '../helpers/hostile-servers.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { byName, runPythonScript } from '../helpers/python-scripts.js';
import { requireTool } from '../helpers/tools.js';

const runScript = runPythonScript;

/** clients/python/keyholder.py (standard library only) against a real server: every primitive. */
describe('Python client against a running server', () => {
  let server: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('locks: renews in a background thread, releases on exit, sets lease.lost on a force release; single calls', async () => {
    const steps = await runScript('lock_flow.py', server.url);
    const step = byName(steps, 'step');
    expect(steps.map((s) => s.step)).toEqual([
      'held-elsewhere',
      'held',
      'released',
      'raised',
      'waited',
      'lost',
      'lease-lost-error',
      'end',
      'single-calls',
      'conditional-force-release',
      'release-request',
      'deadline-passed-unseen',
    ]);
    // A safe deadline passed before its timer ran: the block's exit raises LeaseLostError (deadline).
    expect(step['deadline-passed-unseen']).toEqual({ step: 'deadline-passed-unseen', raised: 'deadline', lost: true });
    expect(step['held-elsewhere']).toMatchObject({ code: 'lock_held', status: 409 });
    expect(step['held-elsewhere']?.retryAfterMs).toBeGreaterThan(0);
    expect(step.held).toMatchObject({ lost: false });
    expect(step.held?.checks).toBeGreaterThanOrEqual(5);
    expect(step.released).toMatchObject({ held: false });
    expect(step.raised).toMatchObject({ error: 'boom', held: false });
    expect(step.raised?.fencingToken).toBeGreaterThan(step.held?.fencingToken as number);
    expect(step.waited?.fencingToken).toBeGreaterThan(step.waited?.previous as number);
    expect(step.lost).toMatchObject({ set: true, reason: 'not_owner' });
    expect(step['lease-lost-error']).toMatchObject({ reason: 'not_owner' });
    expect(step.end).toMatchObject({ held: false });
    expect(step['single-calls']).toEqual({
      step: 'single-calls',
      renewedToken: true,
      renewedTtlMs: 10_000,
      ownerTokenShown: false,
      holder: 'py',
      badTtl: { code: 'invalid_request', status: 400, fields: ['ttlMs'] },
      released: true,
      releaseAgain: { code: 'not_owner', status: 409 },
    });
    expect(step['conditional-force-release']).toEqual({
      step: 'conditional-force-release',
      changed: { code: 'holder_changed', status: 409 },
      kept: 'new',
      evicted: true,
      held: false,
    });
    expect(step['release-request']).toMatchObject({
      before: null,
      asked: { by: 'anonymous', reason: 'deploy' },
      seen: true,
      heard: 1,
      lost: false,
      changed: 'holder_changed',
    });
  }, 60_000);

  it('semaphores, read/write locks, lock sets and watch', async () => {
    const steps = await runScript('primitives.py', server.url);
    const step = byName(steps, 'step');
    expect(steps.map((s) => s.step)).toEqual([
      'semaphore',
      'semaphore-released',
      'rwlock',
      'lock-set',
      'lock-set-released',
      'watch',
      'watch-semaphore',
    ]);
    expect(step.semaphore).toMatchObject({
      permitsHeld: 2,
      holders: ['a', 'b'],
      full: { error: 'SemaphoreFullError', code: 'semaphore_full' },
      mismatch: { error: 'LimitMismatchError', code: 'limit_mismatch' },
      kept: true,
      limit: 2,
    });
    const [first, second] = step.semaphore?.tokens as number[];
    expect(second).toBeGreaterThan(first ?? Infinity);
    expect(step['semaphore-released']).toMatchObject({ permitsHeld: 0 });
    expect(step.rwlock).toMatchObject({
      readers: ['read', 'read'],
      writerRefused: { error: 'RwLockHeldError', code: 'rwlock_held' },
      mode: 'write',
    });
    expect(step.rwlock?.writerToken).toBeGreaterThan(Math.max(...(step.rwlock?.readerTokens as number[])));
    expect(step['lock-set']).toMatchObject({
      member: { error: 'LockHeldError', code: 'lock_held' },
      overlapping: { error: 'LockHeldError', code: 'lock_held' },
      kept: true,
      holders: ['set', 'set'],
    });
    expect(step['lock-set']?.tokens).toEqual(step['lock-set']?.keys);
    expect(step['lock-set-released']).toMatchObject({ held: [false, false] });
    expect(step.watch).toMatchObject({ seen: [false, true, false], stopped: true });
    expect(step['watch-semaphore']).toMatchObject({ before: 0, after: 1 });
  }, 120_000); // two holds of 2.5 TTLs each, the TTL stretched up to 10 s on a starved machine

  it('inspect(queue=True) lists who waits, head first: a lock, a semaphore (weight), a read/write lock (mode)', async () => {
    const step = byName(await runScript('queues.py', server.url), 'step');
    expect(step.lock).toEqual({
      step: 'lock',
      queue: [
        { position: 1, holder: 'w1' },
        { position: 2, holder: 'w2' },
      ],
      waitingSince: true,
      ownerTokenShown: false,
      plainHasQueue: false,
      blocking: 'refused',
      // Once the holder released: the head was granted, the other moved up.
      after: { holder: 'w1', queue: [{ position: 1, holder: 'w2' }] },
      free: false,
    });
    expect(step.semaphore?.queue).toEqual([{ position: 1, holder: 's1', weight: 1 }]);
    expect(step.rwlock?.queue).toEqual([
      { position: 1, holder: 'r1', weight: 1, mode: 'read' },
      { position: 2, holder: 'w2', weight: expect.any(Number), mode: 'write' },
    ]);
  }, 120_000);
});

/**
 * The Python client against servers that answer like a keyholder gone wrong: each refused with a typed,
 * non-retryable error, and the API key never reaches another origin.
 */
describe('Python client: answers it must not trust', () => {
  let hostile: HostileServers;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    requireTool('openssl', 'openssl', ['version']);
    hostile = await HostileServers.start();
  });

  afterAll(async () => {
    await hostile?.close();
  });

  it('redirects, 2xx without a grant and an untrusted certificate are refused; the other origin sees nothing', async () => {
    const steps = await runScript(
      'untrusted_answers.py',
      JSON.stringify({ http: hostile.http, https: hostile.https, other: hostile.other, cafile: hostile.caFile }),
    );
    // First: a client that followed a redirect fails here, whatever it made of the answer.
    expect(hostile.otherSeen).toEqual([]);
    const result = byName(steps, 'case');
    const lease = { ownerToken: 'hostile-owner-token-0001', fencingToken: 7, ttlMs: 10_000 };
    // The control: a well-formed answer is a lease, over http and over https with the CA passed either way.
    expect(result.grant).toMatchObject({ lease });
    expect(result['grant-https-cafile']).toMatchObject({ lease });
    expect(result['grant-https-context']).toMatchObject({ lease });
    expect(result['redirect-other']).toMatchObject({ error: 'RedirectError', code: 'redirected', status: 302, retryable: false });
    expect(result['redirect-other']?.location).toBe(`${hostile.other}/v1/locks/k/acquire`);
    expect(result['to-http']).toMatchObject({ error: 'RedirectError', status: 302 });
    expect(String(result['to-http']?.location)).toMatch(/^http:\/\//);
    for (const behaviour of ['empty-200', 'wrong-types', 'not-json', 'created', 'no-content']) {
      expect(result[behaviour], behaviour).toMatchObject({ error: 'InvalidResponseError', code: 'invalid_response', retryable: false });
    }
    expect(result['wrong-types']?.message).toMatch(/fencingToken/);
    expect(result['untrusted-certificate']).toMatchObject({ error: 'TlsError', code: 'tls_failed', retryable: false });
    expect(result['untrusted-certificate']?.message).toMatch(/CERTIFICATE_VERIFY_FAILED/);
    // A renewal answer with another fencing token than the lease's: the lease is lost, not carried on.
    for (const kind of ['lock', 'semaphore', 'rwlock', 'lock-set']) {
      expect(result[`other-token-${kind}`], kind).toMatchObject({ lost: 'renew_failed', when: 'renewal' });
      expect(result[`other-token-${kind}`]?.message, kind).toMatch(/fencingToken/);
    }
    expect(result['other-token-replayed']).toMatchObject({ lost: 'renew_failed', when: 'acquire' });
  }, 60_000);
});

/** history()'s `recording` and the inspect answers' `releaseRequested`, checked as the TypeScript client checks them. */
describe('Python client: history recording and release requests in inspect answers', () => {
  let on: KeyholderProcess;
  let off: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    [on, off] = await Promise.all([
      KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', HISTORY: 'on' } }),
      KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([on?.stop(), off?.stop()]);
  });

  it('recording: true with events where history is on, false with none where it is off; an answer without it is refused', async () => {
    const step = byName(await runScript('history_and_watch.py', JSON.stringify({ on: on.url, off: off.url })), 'step');
    expect(step.on).toMatchObject({ recording: true, types: ['granted', 'released'] });
    expect(step.off).toMatchObject({ recording: false, events: [] });
    const asked = { at: expect.any(String), by: expect.any(String), reason: 'drain' };
    expect(step['lock-asked']).toMatchObject({ releaseRequested: asked });
    expect(step['semaphore-asked']).toMatchObject({ first: null, second: { reason: null } });
    const { evicted, left, first, second } = step['semaphore-evicted'] as Record<string, unknown>;
    expect(evicted).toEqual([second]);
    expect(left).toEqual([first]);
    const invalid = { error: 'InvalidResponseError', code: 'invalid_response' };
    expect(step['stand-in']).toEqual({
      step: 'stand-in',
      noRecording: invalid,
      recordingText: invalid,
      recorded: 'accepted',
      lockBadRequest: invalid,
      semaphoreBadRequest: invalid,
    });
  }, 60_000);

  it("a renewal whose connection goes silently dead is given up after timeout_s and tried again, not waited on until the lease's deadline", async () => {
    const [result] = await runScript('renew_timeout.py', '');
    // Timeout 0.5 s, the first renewal due at about 2 s: further attempts within the 4 s window (one alone before).
    expect((result?.renewals as number[]).length, JSON.stringify(result)).toBeGreaterThanOrEqual(2);
  });
});
