import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The compiled CLI, run with plain node as the package's `bin` is (vitest's global setup builds dist/). */
const BIN = join(ROOT, 'dist/cli/keyholder.js');

interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Starts `keyholder ...args`; `done` resolves when it exits. With `stdin`, its standard input is a pipe. */
function start(args: string[], env: Record<string, string>, stdin?: 'pipe') {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: [stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const done = new Promise<Finished>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done, stderrSoFar: () => stderr };
}

/** A process is gone, or a zombie nobody has reaped yet (it runs nothing either way). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/** Some process of group `pgid` still runs (a zombie runs nothing; /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."). */
function groupRunning(pgid: number): boolean {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .some((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return Number(pgrp) === pgid && state !== 'Z';
      } catch {
        return false; // gone meanwhile
      }
    });
}

/** A process's argv as `ps` shows it to every user of the host. */
/** A problem the CLI wrote to stderr, as JSON; anything else fails with the text itself, so a failure shows what the CLI said. */
function problemOf(stderr: string): unknown {
  try {
    return JSON.parse(stderr) as unknown;
  } catch {
    throw new Error(`stderr is not one JSON problem:\n${stderr}`);
  }
}

const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');

/** The processes whose parent is `pid` (from /proc/<pid>/stat: "pid (comm) state ppid ..."). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

/**
 * A job for `keyholder run` that records, in `log`, when it starts ("start <name> <ns>") and whether another
 * job of the same test was still running (a process, not a zombie) at that moment ("overlap <name>").
 * It writes its pid to `${log}.<name>.pid`; `trap` is sh code run on the listed signals.
 */
function job(log: string, name: string, body: string, trap = ''): string {
  return [
    `echo $$ > ${log}.${name}.pid`,
    `for f in ${log}.*.pid; do p=$(cat "$f"); [ "$p" = $$ ] && continue; s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); if [ -n "$s" ] && [ "$s" != Z ]; then echo "overlap ${name}" >> ${log}; fi; done`,
    trap,
    `echo "start ${name} $(date +%s%N)" >> ${log}`,
    body,
  ].join('\n');
}

/**
 * How long a `keyholder run` may take to start its command: two node start-ups (keyholder run and its
 * guardian) and a request, which took up to 30 s each on a 2-core machine running a dozen test suites.
 */
const START_MS = 120_000;

/** Forever, in short sleeps (so that a trap runs soon after its signal). */
const FOREVER = 'while true; do sleep 0.05; done';

// Every command is a node start-up: seconds each on a starved machine, so the budgets are generous.
describe('keyholder CLI against a real server', { timeout: 120_000 }, () => {
  let server: KeyholderProcess;
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => start(args, env).done;
  const key = (name: string) => `cli-${randomUUID().slice(0, 8)}-${name}`;
  const file = (name: string) => join(dir, `${randomUUID().slice(0, 8)}-${name}`);
  const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').filter(Boolean) : []);

  beforeAll(async () => {
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
    dir = mkdtempSync(join(tmpdir(), 'keyholder-cli-'));
    env = { KEYHOLDER_URL: server.url };
  });

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('two runs of the same job at once: exactly one command runs, the other exits 75', async () => {
    const k = key('once');
    const log = file('log');
    const go = file('go');
    const job = `echo "$KEYHOLDER_KEY $KEYHOLDER_FENCING_TOKEN" >> ${log}; while [ ! -e ${go} ]; do sleep 0.05; done`;
    const a = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    const b = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    // One of them finds the lock held and gives up while the other's command is still running.
    const first = await Promise.race([a.done, b.done]);
    expect(first.code).toBe(75);
    expect(first.stderr).toContain('held by someone else');
    await vi.waitFor(() => expect(lines(log)).toHaveLength(1), { timeout: 20_000 });
    writeFileSync(go, '');
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect([ra.code, rb.code].sort()).toEqual([0, 75]);
    expect(lines(log)).toHaveLength(1);
    expect(lines(log)[0]).toMatch(new RegExp(`^${k} \\d+$`));
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
  });

  it('with --wait-ms they run one after the other, with increasing fencing tokens', async () => {
    const k = key('queue');
    const log = file('log');
    const job = `echo "start $KEYHOLDER_FENCING_TOKEN" >> ${log}; sleep 0.3; echo "end $KEYHOLDER_FENCING_TOKEN" >> ${log}`;
    const runs = [0, 1].map(() => start(['run', '--key', k, '--ttl-ms', '15000', '--wait-ms', '30000', '--', 'sh', '-c', job], env));
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    const entries = lines(log).map((l) => l.split(' '));
    expect(entries.map(([what]) => what)).toEqual(['start', 'end', 'start', 'end']);
    const tokens = entries.map(([, token]) => Number(token));
    expect(tokens[0]).toBe(tokens[1]);
    expect(tokens[2]).toBe(tokens[3]);
    expect(tokens[2]).toBeGreaterThan(tokens[0] ?? Infinity);
  });

  it('a force release stops the whole process group (a grandchild that ignores SIGTERM too) and exits 76', async () => {
    const k = key('forced');
    const pidFile = file('grandchild');
    // The grandchild ignores SIGTERM, so only the SIGKILL after --kill-grace-ms stops it.
    const job = `sh -c 'trap "" TERM; while true; do sleep 0.05; done' & echo $! > ${pidFile}; wait`;
    const run = start(['run', '--key', k, '--ttl-ms', '6000', '--kill-grace-ms', '500', '--', 'sh', '-c', job], env);
    await vi.waitFor(() => expect(lines(pidFile)).toHaveLength(1), { timeout: 20_000 });
    const grandchild = Number(lines(pidFile)[0]);
    expect(gone(grandchild)).toBe(false);
    const forced = await call(server.url, 'DELETE', `/v1/locks/${k}?namespace=default`);
    expect(forced.status).toBe(200);
    const result = await run.done;
    expect(result.code).toBe(76);
    expect(result.stderr).toContain('not_owner');
    expect(gone(grandchild)).toBe(true);
  });

  it("passes the command's exit status through, and 127 for a command that does not exist", async () => {
    expect((await cli('run', '--key', key('status'), '--ttl-ms', '5000', '--', 'sh', '-c', 'exit 7')).code).toBe(7);
    const missing = await cli('run', '--key', key('missing'), '--ttl-ms', '5000', '--', 'no-such-command-here');
    expect(missing.code).toBe(127);
  });

  it('--keep leaves the lock held after the command, until its TTL; without it the lock is released', async () => {
    const kept = key('kept');
    const released = key('released');
    expect((await cli('run', '--key', kept, '--ttl-ms', '60000', '--keep', '--', 'true')).code).toBe(0);
    expect((await cli('run', '--key', released, '--ttl-ms', '60000', '--', 'true')).code).toBe(0);
    const keptState = (await call(server.url, 'GET', `/v1/locks/${kept}`)).body as { held: boolean; ttlRemainingMs: number };
    expect(keptState.held).toBe(true);
    // Not renewed after the command ended: what is left is what the one grant gave.
    expect(keptState.ttlRemainingMs).toBeLessThanOrEqual(60_000);
    expect((await call(server.url, 'GET', `/v1/locks/${released}`)).body).toMatchObject({ held: false });
    // The same tick started again finds its key taken and does not run.
    expect((await cli('run', '--key', kept, '--ttl-ms', '60000', '--keep', '--', 'true')).code).toBe(75);
  });

  it('a release request reaches the command as SIGTERM, or the signal --on-release-request names; the lease is kept meanwhile', async () => {
    for (const [flags, trapped] of [
      [[], 'TERM'],
      [['--on-release-request', 'usr1'], 'USR1'],
    ] as const) {
      const k = key(`asked-${trapped}`);
      const out = file('out');
      const job = `trap 'echo got-${trapped} >> ${out}; exit 4' ${trapped}; echo "$KEYHOLDER_FENCING_TOKEN" >> ${out}; while true; do sleep 0.05; done`;
      const run = start(['run', '--key', k, '--ttl-ms', '3000', ...flags, '--', 'sh', '-c', job], env);
      await vi.waitFor(() => expect(lines(out)).toHaveLength(1), { timeout: 20_000 });
      const fencingToken = Number(lines(out)[0]);
      const asked = await call(server.url, 'POST', `/v1/locks/${k}/release-request?namespace=default`, { fencingToken, reason: 'drain' });
      expect(asked.status).toBe(200);
      // Nothing happens to the command until a renewal brings the request (about a third of the TTL).
      const result = await run.done;
      expect(lines(out)).toEqual([String(fencingToken), `got-${trapped}`]);
      expect(result.code).toBe(4);
      expect(result.stderr).toContain('asked the holder');
      expect(result.stderr).toContain('(drain)');
      expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
    }
    const bad = await cli('run', '--key', key('bad-signal'), '--ttl-ms', '3000', '--on-release-request', 'KILL', '--', 'true');
    expect(bad.code).toBe(2);
  });

  it('SIGTERM to keyholder run is passed to the command, and the lock is released', async () => {
    const k = key('sigterm');
    const out = file('out');
    const job = `trap 'echo got-term >> ${out}; exit 3' TERM; echo started >> ${out}; while true; do sleep 0.05; done`;
    const run = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    await vi.waitFor(() => expect(lines(out)).toEqual(['started']), { timeout: 20_000 });
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: true });
    run.child.kill('SIGTERM');
    const result = await run.done;
    expect(lines(out)).toEqual(['started', 'got-term']);
    expect(result.code).toBe(3);
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
  });

  it('the command gets neither the API key (unless --pass-api-key) nor an owner token; no secret in ps', { timeout: 600_000 }, async () => {
    const apiKey = `kh_${randomUUID()}`;
    const withSecrets = { ...env, KEYHOLDER_API_KEY: apiKey, KEYHOLDER_OWNER_TOKEN: `owner-${randomUUID()}` };
    const seen = file('env');
    const go = file('go');
    const run = start(
      [
        'run',
        '--key',
        key('env'),
        '--ttl-ms',
        '15000',
        '--',
        'sh',
        '-c',
        `env > ${seen}.tmp; mv ${seen}.tmp ${seen}; while [ ! -e ${go} ]; do sleep 0.05; done`,
      ],
      withSecrets,
    );
    await vi.waitFor(() => expect(lines(seen).length).toBeGreaterThan(0), { timeout: START_MS });
    // keyholder run -> its guardian -> the command: argv of each, as `ps` shows it; the guardian's environment too.
    const cliPid = run.child.pid as number;
    const [guardian] = childrenOf(cliPid);
    const [command] = childrenOf(guardian as number);
    expect(cmdline(guardian as number)).toContain('guardian');
    for (const pid of [cliPid, guardian as number, command as number]) {
      expect(cmdline(pid)).not.toContain(apiKey);
      expect(cmdline(pid)).not.toContain(withSecrets.KEYHOLDER_OWNER_TOKEN);
    }
    expect(readFileSync(`/proc/${guardian}/environ`, 'utf8')).not.toContain(apiKey);
    writeFileSync(go, '');
    expect((await run.done).code).toBe(0);
    const childEnv = readFileSync(seen, 'utf8');
    expect(childEnv).toContain('KEYHOLDER_FENCING_TOKEN=');
    expect(childEnv).not.toContain(apiKey);
    expect(childEnv).not.toContain(withSecrets.KEYHOLDER_OWNER_TOKEN);

    const passed = file('env-passed');
    const withKey = await start(
      ['run', '--key', key('env'), '--ttl-ms', '15000', '--pass-api-key', '--', 'sh', '-c', `env > ${passed}`],
      withSecrets,
    ).done;
    expect(withKey.code).toBe(0);
    expect(readFileSync(passed, 'utf8')).toContain(`KEYHOLDER_API_KEY=${apiKey}\n`);
  });

  // Each signal to keyholder run while a second run of the same key waits in the queue: the signal reaches
  // the command (its trap logs it), and the second command starts only once the first is gone.
  const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGTSTP', 'SIGUSR1', 'SIGUSR2', 'SIGALRM'] as const;
  it.each(SIGNALS)(
    '%s to keyholder run: passed on to the command (SIGTSTP refused); no second holder while it runs',
    { timeout: 600_000 },
    async (sig) => {
      const k = key(sig.toLowerCase());
      const log = file('log');
      const trapped = sig === 'SIGTSTP' ? 'TERM' : sig.slice(3);
      const trap = `trap 'echo "got ${trapped} a" >> ${log}; echo "end a $(date +%s%N)" >> ${log}; exit 3' ${trapped}`;
      const a = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job(log, 'a', FOREVER, trap)], env);
      await vi.waitFor(() => expect(lines(log)).toHaveLength(1), { timeout: START_MS });
      const b = start(['run', '--key', k, '--ttl-ms', '15000', '--wait-ms', '60000', '--', 'sh', '-c', job(log, 'b', 'true')], env);
      const queued = async () => expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: true, waiters: 1 });
      await vi.waitFor(queued, { timeout: START_MS, interval: 50 });
      a.child.kill(sig);
      if (sig === 'SIGTSTP') {
        // Refused: neither keyholder run nor its command stops, and the lock stays held, the other run queued.
        await vi.waitFor(() => expect(a.stderrSoFar()).toContain('SIGTSTP ignored'), { timeout: START_MS });
        expect(readFileSync(`/proc/${a.child.pid}/status`, 'utf8')).not.toMatch(/^State:\s+T/m);
        expect(readFileSync(`/proc/${Number(lines(`${log}.a.pid`)[0])}/status`, 'utf8')).not.toMatch(/^State:\s+T/m);
        await queued();
        a.child.kill('SIGTERM');
      }
      const [ra, rb] = await Promise.all([a.done, b.done]);
      expect(ra.code).toBe(3);
      expect(rb.code).toBe(0);
      const entries = lines(log);
      expect(entries.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['start a', `got ${trapped}`, 'end a', 'start b']);
      const at = (what: string) => Number(entries.find((l) => l.startsWith(what))?.split(' ')[2]);
      expect(at('start b')).toBeGreaterThan(at('end a'));
    },
  );

  // The lease cannot end before `askedAt + ttlRemainingMs`: the server counted what remained from a moment
  // after the question was sent, and a renewal after it could only move the end later (asked once nothing
  // renews any more, it is the end itself, to within the answer's round trip).
  const leaseEndsNoEarlierThan = async (url: string, k: string) => {
    const askedAt = performance.now();
    const state = (await call(url, 'GET', `/v1/locks/${k}`)).body as { held: boolean; ttlRemainingMs: number };
    expect(state.held).toBe(true);
    return askedAt + state.ttlRemainingMs;
  };

  // These three wait out a 10 s lease each, and nothing else: they run side by side (their keys, and the
  // first one's Redis and instances, are their own).
  it.concurrent(
    'server killed mid-run: the command has stopped (SIGKILL at the safe deadline) before its lease could end',
    { timeout: 600_000 },
    async () => {
      // Two keyholder instances on one Redis: the run's instance is killed, the lease lives on in Redis, and
      // the other instance tells how long it has left once nothing can renew it any more.
      const redis = await RedisServer.start();
      const own = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', REDIS_URL: redis.url } });
      const other = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', REDIS_URL: redis.url } });
      try {
        const k = key('server-killed');
        const log = file('log');
        const ttlMs = 10_000;
        // The command ignores SIGTERM: only the SIGKILL at the safe deadline stops it.
        const run = start(
          [
            'run',
            '--key',
            k,
            '--ttl-ms',
            String(ttlMs),
            '--kill-grace-ms',
            '1000',
            '--',
            'sh',
            '-c',
            job(log, 'a', FOREVER, "trap '' TERM"),
          ],
          { KEYHOLDER_URL: own.url },
        );
        await vi.waitFor(() => expect(lines(log)).toHaveLength(1), { timeout: START_MS });
        const pgid = Number(lines(`${log}.a.pid`)[0]);
        await own.stop('SIGKILL');
        const leaseEnd = await leaseEndsNoEarlierThan(other.url, k);
        await vi.waitFor(() => expect(groupRunning(pgid)).toBe(false), { timeout: 2 * ttlMs, interval: 20 });
        const marginMs = leaseEnd - performance.now();
        console.log(
          `keyholder run, server killed: the command's group was gone ${marginMs.toFixed(0)} ms before the lease could end (TTL ${ttlMs} ms)`,
        );
        expect(marginMs).toBeGreaterThan(0);
        const result = await run.done;
        expect(result.code).toBe(76);
        expect(result.stderr).toContain('no renewal was confirmed in time');
      } finally {
        await Promise.all([own.stop(), other.stop()]);
        await redis.stop();
      }
    },
  );

  it.concurrent.each(['SIGKILL', 'SIGSTOP'] as const)(
    '%s to keyholder run: its guardian stops the command before the lease could end; no second holder',
    { timeout: 600_000 },
    async (sig) => {
      const k = key(sig.toLowerCase());
      const log = file('log');
      const ttlMs = 10_000;
      const a = start(
        ['run', '--key', k, '--ttl-ms', String(ttlMs), '--kill-grace-ms', '1000', '--', 'sh', '-c', job(log, 'a', FOREVER, "trap '' TERM")],
        env,
      );
      await vi.waitFor(() => expect(lines(log)).toHaveLength(1), { timeout: START_MS });
      const pgid = Number(lines(`${log}.a.pid`)[0]);
      const b = start(['run', '--key', k, '--ttl-ms', '15000', '--wait-ms', '60000', '--', 'sh', '-c', job(log, 'b', 'true')], env);
      await vi.waitFor(async () => expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ waiters: 1 }), {
        timeout: START_MS,
      });
      a.child.kill(sig);
      const leaseEnd = await leaseEndsNoEarlierThan(server.url, k);
      await vi.waitFor(() => expect(groupRunning(pgid)).toBe(false), { timeout: 2 * ttlMs, interval: 20 });
      const marginMs = leaseEnd - performance.now();
      console.log(
        `keyholder run, ${sig}: the command's group was gone ${marginMs.toFixed(0)} ms before the lease could end (TTL ${ttlMs} ms)`,
      );
      expect(marginMs).toBeGreaterThan(0);
      expect((await b.done).code).toBe(0);
      expect(lines(log).filter((l) => l.startsWith('overlap'))).toEqual([]);
      expect(lines(log).map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['start a', 'start b']);
      if (sig === 'SIGSTOP') {
        a.child.kill('SIGCONT');
        expect((await a.done).code).toBe(76);
      } else {
        expect((await a.done).signal).toBe('SIGKILL');
      }
    },
  );

  it('acquire, inspect, renew, release, ls: JSON on stdout, problems on stderr, exit 0 / 75 / 1', async () => {
    const k = key('shell');
    // Long leases: each command is a node start-up, which takes seconds on a loaded machine.
    const acquired = await cli('acquire', '--key', k, '--ttl-ms', '120000', '--holder', 'script');
    expect(acquired.code).toBe(0);
    const grant = JSON.parse(acquired.stdout) as { ownerToken: string; fencingToken: number };
    expect(grant).toMatchObject({ key: k, holder: 'script' });

    const held = await cli('acquire', '--key', k, '--ttl-ms', '5000');
    expect(held.code).toBe(75);
    expect(held.stdout).toBe('');
    expect(problemOf(held.stderr)).toMatchObject({ code: 'lock_held', status: 409 });

    const inspected = await cli('inspect', '--key', k);
    expect(JSON.parse(inspected.stdout)).toMatchObject({ held: true, holder: 'script', fencingToken: grant.fencingToken });

    // The token on stdin: while the command waits for it, nothing secret is in its argv (what `ps` shows).
    const renewing = start(['renew', '--key', k, '--ttl-ms', '180000'], env, 'pipe');
    const renewPid = renewing.child.pid as number;
    expect(cmdline(renewPid)).toContain('renew');
    expect(cmdline(renewPid)).not.toContain(grant.ownerToken);
    renewing.child.stdin?.end(`${grant.ownerToken}\n`);
    const renewed = await renewing.done;
    expect(renewed.code).toBe(0);
    expect(JSON.parse(renewed.stdout)).toMatchObject({ fencingToken: grant.fencingToken, ttlMs: 180000 });

    const listed = await cli('ls', '--namespace', 'default', '--prefix', k);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { locks: Array<{ key: string }> }).locks.map((l) => l.key)).toEqual([k]);

    // The token in the environment.
    const withToken = { ...env, KEYHOLDER_OWNER_TOKEN: grant.ownerToken };
    expect((await start(['release', '--key', k], withToken).done).code).toBe(0);
    const again = await start(['release', '--key', k], withToken).done;
    expect(again.code).toBe(75);
    expect(problemOf(again.stderr)).toMatchObject({ code: 'not_owner' });

    const badTtl = await cli('acquire', '--key', k, '--ttl-ms', '1');
    expect(badTtl.code).toBe(1);
    expect(problemOf(badTtl.stderr)).toMatchObject({ code: 'invalid_request' });

    const unreachable = await start(['inspect', '--key', k, '--url', 'http://127.0.0.1:1', '--retry-ms', '0'], {}).done;
    expect(unreachable.code).toBe(1);
    expect(problemOf(unreachable.stderr)).toMatchObject({ code: 'unreachable' });
  }, 240_000);

  it('--help on every command; bad flags are named, exit 2', async () => {
    for (const command of ['run', 'acquire', 'renew', 'release', 'inspect', 'ls', 'keys']) {
      const help = await cli(command, '--help');
      expect(help.code, command).toBe(0);
      expect(help.stdout, command).toMatch(new RegExp(`^usage: keyholder ${command}`));
    }
    const top = await cli('--help');
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('run');

    const typo = await cli('acquire', '--key', 'k', '--tll-ms', '5000');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('--tll-ms');
    const notANumber = await cli('run', '--key', 'k', '--ttl-ms', 'soon', '--', 'true');
    expect(notANumber.code).toBe(2);
    expect(notANumber.stderr).toContain('--ttl-ms must be a whole number');
    const missing = await cli('renew', '--key', 'k', '--ttl-ms', '5000');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no owner token: set KEYHOLDER_OWNER_TOKEN or pipe the token on stdin');
    const inArgv = await cli('release', '--key', 'k', '--owner-token', 'secret');
    expect(inArgv.code).toBe(2);
    expect(inArgv.stderr).toContain('--owner-token was removed');
    // The grace comes out of the TTL: one that leaves renewals no room is refused before anything runs.
    const graceTooLong = await cli('run', '--key', 'k', '--ttl-ms', '5000', '--kill-grace-ms', '5000', '--', 'true');
    expect(graceTooLong.code).toBe(2);
    expect(graceTooLong.stderr).toContain('--kill-grace-ms (5000) must be at most half of --ttl-ms (5000)');
    expect((await cli('run', '--key', 'k', '--ttl-ms', '5000', '--kill-grace-ms', '2501', '--', 'true')).code).toBe(2);
    const noCommand = await cli('run', '--key', 'k', '--ttl-ms', '5000');
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain('--');
    expect((await cli('frobnicate')).code).toBe(2);

    const minted = await cli('keys', 'new', '--id', 'team-a', '--namespace', 'team-a', '--scopes', 'locks,admin');
    expect(minted.code).toBe(0);
    expect(minted.stdout).toMatch(/\bkh_[A-Za-z0-9_-]{43}\b/);
    expect(minted.stdout).toContain('hash:');
    const badScope = await cli('keys', 'new', '--id', 'team-a', '--namespace', 'team-a', '--scopes', 'root');
    expect(badScope.code).toBe(2);
    expect(badScope.stderr).toContain('--scopes');
    expect((await cli('keys', 'old')).code).toBe(2);
  }, 240_000);
});
