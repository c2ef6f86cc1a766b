#!/usr/bin/env node
/* global process, fetch, AbortSignal, setInterval, clearInterval, setTimeout */
/**
 * keyholder-run: run a command only if this process gets the lock; the shape of `keyholder run`.
 *
 *   node examples/cron/keyholder-run.mjs --key K --ttl-ms N [--keep] [--url URL] [--timeout-ms N] -- command [args...]
 *
 * - The lock is taken without waiting: if another server holds it, the command does not run and the
 *   exit code is 75 (EX_TEMPFAIL; `--conflict-exit-code` changes it, as `flock -E` does).
 * - While the command runs, the lease is renewed every ttl/3. If a renewal says the lease is gone
 *   (not_owner), the command is sent SIGTERM: it no longer runs alone.
 * - The command gets KEYHOLDER_FENCING_TOKEN, to pass to any resource that checks fencing tokens.
 * - When the command ends, the lock is released, or with `--keep` left to run out at its TTL: for a
 *   job run once per tick, name the tick in the key and keep it, so a server whose clock is late
 *   cannot take the same tick's lock again after the job finished.
 * - No answer, 408, 429 or 503 from keyholder: retried with backoff for up to --timeout-ms (30 s); then
 *   exit code 69 and the command does not run.
 * - The exit code is the command's.
 *
 * Plain JavaScript with no dependencies, so it starts in tens of milliseconds from cron or a timer.
 * KEYHOLDER_URL and KEYHOLDER_API_KEY come from the environment when not given as flags.
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const dashDash = process.argv.indexOf('--');
if (dashDash === -1 || dashDash === process.argv.length - 1) usage('a command after -- is required');
const command = process.argv.slice(dashDash + 1);
const { values } = parseArgs({
  args: process.argv.slice(2, dashDash),
  options: {
    key: { type: 'string' },
    'ttl-ms': { type: 'string' },
    keep: { type: 'boolean', default: false },
    url: { type: 'string', default: process.env.KEYHOLDER_URL ?? 'http://127.0.0.1:3000' },
    holder: { type: 'string', default: process.env.HOSTNAME ?? `pid-${process.pid}` },
    'conflict-exit-code': { type: 'string', default: '75' },
    // 30 s: a scheduler on a busy host is better late than skipped; nothing runs until keyholder answers.
    'timeout-ms': { type: 'string', default: '30000' },
  },
});
if (!values.key) usage('--key is required');
const ttlMs = Number(values['ttl-ms']);
if (!Number.isInteger(ttlMs) || ttlMs <= 0) usage('--ttl-ms must be a positive integer');

function usage(message) {
  process.stderr.write(`keyholder-run: ${message}\nusage: keyholder-run --key K --ttl-ms N [--keep] [--url URL] -- command [args...]\n`);
  process.exit(64);
}

const lockPath = `${values.url}/v1/locks/${encodeURIComponent(values.key)}`;
async function call(op, body) {
  const headers = { 'content-type': 'application/json' };
  if (process.env.KEYHOLDER_API_KEY) headers.authorization = `Bearer ${process.env.KEYHOLDER_API_KEY}`;
  const res = await fetch(`${lockPath}/${op}`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(Number(values['timeout-ms'])) });
  return { status: res.status, body: await res.json().catch(() => ({})) };
}

// Answers that granted nothing for certain and may change on a retry: no answer at all, 408 (the request
// was too slow to arrive), 429 (rate limited), 503 (store unavailable or shutting down). Retried with
// backoff until --timeout-ms; a lock held by another server (409) is final.
const RETRYABLE = new Set([0, 408, 429, 503]);
const deadline = Date.now() + Number(values['timeout-ms']);
let grant;
for (let attempt = 0; ; attempt++) {
  grant = await call('acquire', { ttlMs, holder: values.holder }).catch((err) => ({ status: 0, body: { code: err.message } }));
  if (!RETRYABLE.has(grant.status) || Date.now() > deadline) break;
  await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
}
if (grant.status === 409) {
  process.stderr.write(`keyholder-run: ${values.key} is held; not running\n`);
  process.exit(Number(values['conflict-exit-code']));
}
if (grant.status !== 200) {
  process.stderr.write(`keyholder-run: acquire answered ${grant.status} ${grant.body.code ?? ''}; not running\n`);
  process.exit(69);
}
const { ownerToken, fencingToken } = grant.body;

const child = spawn(command[0], command.slice(1), {
  stdio: 'inherit',
  env: { ...process.env, KEYHOLDER_FENCING_TOKEN: String(fencingToken), KEYHOLDER_LOCK_KEY: values.key },
});
const renewer = setInterval(async () => {
  const renewed = await call('renew', { ownerToken, ttlMs }).catch(() => ({ status: 0, body: {} }));
  if (renewed.status === 409) {
    process.stderr.write(`keyholder-run: lost the lease on ${values.key}; stopping the command\n`);
    child.kill('SIGTERM');
  }
}, Math.max(1, Math.floor(ttlMs / 3)));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));

const exitCode = await new Promise((resolve) => {
  child.once('error', (err) => {
    process.stderr.write(`keyholder-run: cannot start ${command[0]}: ${err.message}\n`);
    resolve(127);
  });
  child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
});
clearInterval(renewer);
if (!values.keep) await call('release', { ownerToken }).catch(() => undefined);
process.exit(exitCode);
