import { Redis } from 'ioredis';
import { readFileSync } from 'node:fs';
import { RedisServer } from '../test/helpers/redis-server.js';
import { commandMicros } from './redis-stats.js';
import { newOwnerToken } from '../src/domain/lease-service.js';
import { ownerTokenHex } from '../src/store/redis/owner-bytes.js';
const server = await RedisServer.start();
const r = new Redis(server.url, { enableAutoPipelining: true });
async function time(label: string, script: string, args: (i: number) => (string | number)[], numKeys: number, n = 20000) {
  const sha = (await r.script('LOAD', script)) as string;
  for (let i = 0; i < 2000; i++) await r.evalsha(sha, numKeys, ...args(i));
  const out: string[] = [];
  for (let round = 0; round < 3; round++) {
    await r.config('RESETSTAT');
    let next = 0;
    await Promise.all(Array.from({ length: 50 }, async () => { while (next < n) { const i = next++; await r.evalsha(sha, numKeys, ...args(i)); } }));
    const m = commandMicros(await r.info('commandstats'));
    out.push(((m.get('evalsha') ?? 0) / n).toFixed(2));
  }
  console.log(label.padEnd(40), out.join(' '));
}
const acquireSrc = readFileSync('/tmp/acquire.lua', 'utf8');
const releaseSrc = readFileSync('/tmp/release.lua', 'utf8');
const keys = (i: number) => [`kh:{ns/k${i % 10000}}`, `kh:{ns/k${i % 10000}}:q`, `kh:{ns/k${i % 10000}}:w`, 'kh:{ns/k}:qc', 'kh:{ns/k}:qe'];
const tok = newOwnerToken();
const argv = (i: number, q: number) => [tok, 30000, '', 1000, '0|0|0|-|-', 'kh:grant:', `ns/k${i % 10000}`, '', q, 0, ownerTokenHex(tok), 'NONCE123456789'];
await time('return 1, no args', 'return 1', () => [], 0);
await time('return 1, 5 keys 12 args', 'return 1', (i) => [...keys(i), ...argv(i, 0)], 5);
await time('echo wrapper only, 5 keys 12 args', readFileSync('/dev/stdin', 'utf8') || 'return 1', (i) => [...keys(i), ...argv(i, 0)], 5);
