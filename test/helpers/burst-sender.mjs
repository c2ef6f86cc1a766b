// One instance's share of a burst (test/helpers/burst.ts): opens its connections' pool, prints "ready",
// and on "go" (stdin) sends every caller's acquire at once; then prints one JSON line with each answer
// (kind, round trip, owner and fencing token of a grant, detail of a refusal) and exits. A process per
// instance, so that no single sender's event loop, busy with thousands of requests, is what makes the
// answers late (one sender for 1,500 callers stalled for seconds).
// argv: a JSON object { url, path, callers, first, ttlMs, waitMs }.
import process from 'node:process';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';

const { url, path, callers, first, ttlMs, waitMs } = JSON.parse(process.argv[2]);
const agent = new Agent({ connections: callers + 8, pipelining: 1 });
const lag = monitorEventLoopDelay({ resolution: 10 });

async function call(i) {
  const sentAt = performance.now();
  try {
    const res = await request(`${url}${path}`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs, waitMs, holder: `caller-${first + i}` }),
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    const body = await res.body.json();
    const ms = performance.now() - sentAt;
    if (res.statusCode === 200) return { kind: '200', ms, ownerToken: body.ownerToken, fencingToken: body.fencingToken };
    return { kind: `${res.statusCode} ${String(body.code)}`, ms, detail: String(body.detail) };
  } catch (err) {
    return { kind: `error ${err.message}`, ms: performance.now() - sentAt };
  }
}

let started = false;
process.stdin.on('data', async (chunk) => {
  if (started || !String(chunk).includes('go')) return;
  started = true;
  lag.enable();
  const answers = await Promise.all(Array.from({ length: callers }, (_, i) => call(i)));
  lag.disable();
  process.stdout.write(`${JSON.stringify({ answers, maxLagMs: Math.round(lag.max / 1e6) })}\n`);
  await agent.close();
  process.exit(0);
});
process.stdout.write('ready\n');
