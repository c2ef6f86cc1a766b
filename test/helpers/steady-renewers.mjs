// Steady holders beside a burst (test/helpers/burst.ts): each takes its own lock (3 s lease) and renews
// it every 500 ms, as a client library would at a sixth of the lease, until "stop" arrives on stdin;
// then prints one JSON line with the renewals' answers, round trips and the leases lost. Plain
// JavaScript in its own process, like a real client elsewhere: the burst's sender is saturated by
// thousands of callers, and a renewal it sent late (its timers held up for seconds) would read as a
// lease the instances lost.
// argv: a JSON object { urls, key, renewers, ttlMs, everyMs }.
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';

const { urls, key, renewers, ttlMs, everyMs } = JSON.parse(process.argv[2]);
const agents = urls.map(() => new Agent({ connections: renewers + 2, pipelining: 1 }));
const lag = monitorEventLoopDelay({ resolution: 10 });
lag.enable();

async function post(instance, path, body) {
  const res = await request(`${urls[instance]}${path}`, {
    method: 'POST',
    dispatcher: agents[instance],
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  return { status: res.statusCode, body: await res.body.json() };
}

const holders = await Promise.all(
  Array.from({ length: renewers }, async (_, i) => {
    const instance = i % urls.length;
    const path = `/v1/locks/${key}-steady-${i}`;
    const acquireSentAt = performance.now();
    // An instance already over its budget (a loaded machine) answers 503 overloaded: retry, as a client does.
    let held = await post(instance, `${path}/acquire`, { ttlMs });
    for (let attempt = 0; held.status === 503 && held.body.code === 'overloaded' && attempt < 60; attempt++) {
      await sleep(500);
      held = await post(instance, `${path}/acquire`, { ttlMs });
    }
    if (held.status !== 200) throw new Error(`a steady holder's acquire answered ${held.status}: ${JSON.stringify(held.body)}`);
    return { instance, path: `${path}/renew`, ownerToken: held.body.ownerToken, lastOkSentAt: acquireSentAt };
  }),
);

let renewing = true;
const renewals = {};
const roundTrips = [];
const lostLeases = [];
const loops = holders.map(async (holder) => {
  while (renewing) {
    await sleep(everyMs);
    const sentAt = performance.now();
    try {
      const res = await post(holder.instance, holder.path, { ownerToken: holder.ownerToken, ttlMs });
      const answeredAt = performance.now();
      roundTrips.push(answeredAt - sentAt);
      // A renewal answered too late to trust is refused with its lease kept (the holder renews again): not a
      // refusal by the load budget, and no lease lost.
      const late = res.status === 503 && String(res.body.detail).includes('the lease was kept');
      const kind = res.status === 200 ? '200' : `${res.status} ${String(res.body.code)}${late ? ' (late answer, lease kept)' : ''}`;
      renewals[kind] = (renewals[kind] ?? 0) + 1;
      if (res.status === 200) holder.lastOkSentAt = sentAt;
      if (kind === '409 not_owner') {
        lostLeases.push({ sinceLastOkSentMs: Math.round(answeredAt - holder.lastOkSentAt), roundTripMs: Math.round(answeredAt - sentAt) });
        // The lease is gone: a client stops renewing it (asking again would count the same loss again).
        break;
      }
    } catch (err) {
      const kind = `error ${err.message}`;
      renewals[kind] = (renewals[kind] ?? 0) + 1;
    }
  }
});

process.stdin.on('data', (chunk) => {
  if (String(chunk).includes('stop')) renewing = false;
});
process.stdin.on('end', () => (renewing = false));
process.stdout.write('ready\n');
await Promise.all(loops);
lag.disable();
process.stdout.write(`${JSON.stringify({ renewals, roundTrips, lostLeases, maxLagMs: Math.round(lag.max / 1e6) })}\n`);
await Promise.all(agents.map((agent) => agent.close()));
