// Asks GET /livez of each URL given, every INTERVAL ms, until "stop" arrives on stdin; then prints one
// JSON line: every round trip in ms, and how many failed. Plain JavaScript in its own process, so the
// burst's sender (busy) does not delay the probes; one keep-alive connection per URL, as a probe has.
import http from 'node:http';
import process from 'node:process';
import { setTimeout } from 'node:timers';
import { performance } from 'node:perf_hooks';

const [intervalArg, ...urls] = process.argv.slice(2);
const intervalMs = Number(intervalArg);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const latencies = [];
let failed = 0;
let stopping = false;

function probe(url) {
  return new Promise((resolve) => {
    const sentAt = performance.now();
    const req = http.get(`${url}/livez`, { agent, timeout: 10_000 }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode === 200) latencies.push(performance.now() - sentAt);
        else failed++;
        resolve();
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => {
      failed++;
      resolve();
    });
  });
}

async function loop(url) {
  while (!stopping) {
    const startedAt = performance.now();
    await probe(url);
    const left = intervalMs - (performance.now() - startedAt);
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  }
}

const loops = urls.map((url) => loop(url));
process.stdin.on('data', (chunk) => {
  if (String(chunk).includes('stop')) stopping = true;
});
process.stdin.on('end', () => (stopping = true));
process.stdout.write('ready\n');
await Promise.all(loops);
process.stdout.write(`${JSON.stringify({ latencies, failed })}\n`);
agent.destroy();
