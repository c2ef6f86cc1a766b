import Fastify from 'fastify';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { FLOOR_ACQUIRE as ACQUIRE, FLOOR_RELEASE as RELEASE } from './floor-lock-scripts.js';

/**
 * The lock floor: the naive lock service a team would write in an afternoon, as the measure of what a
 * lock call costs at least on this machine. Fastify, one Lua script per call through ioredis
 * (auto-pipelining on), no validation, no auth, no rate limit, no quota, no metrics, no logs. The lock
 * is a string (SET NX PX) and a fencing counter beside it (INCR), both under one hash tag; release
 * checks the owner and deletes. 2 commands inside the script per call, 4 per pair.
 */

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableAutoPipelining: true, maxRetriesPerRequest: 0 });
redis.defineCommand('floorAcquire', { lua: ACQUIRE, numberOfKeys: 2 });
redis.defineCommand('floorRelease', { lua: RELEASE, numberOfKeys: 1 });
type Script = (...args: Array<string | number>) => Promise<number>;
const commands = redis as unknown as { floorAcquire: Script; floorRelease: Script };
const lockKey = (key: string) => `floor:{${key}}`;
const fenceKey = (key: string) => `floor:{${key}}f`;

const app = Fastify({ logger: false });
app.get('/ready', async () => ({ ok: true }));
app.post('/v1/locks/:key/acquire', async (request, reply) => {
  const { key } = request.params as { key: string };
  const { ttlMs } = request.body as { ttlMs: number };
  const ownerToken = randomBytes(16).toString('base64url');
  const fencingToken = await commands.floorAcquire(lockKey(key), fenceKey(key), ownerToken, ttlMs);
  if (fencingToken === 0) return reply.code(409).send({ code: 'lock_held' });
  return { key, ownerToken, fencingToken, ttlMs };
});
app.post('/v1/locks/:key/release', async (request, reply) => {
  const { key } = request.params as { key: string };
  const { ownerToken } = request.body as { ownerToken: string };
  const released = await commands.floorRelease(lockKey(key), ownerToken);
  if (released === 0) return reply.code(409).send({ code: 'not_owner' });
  return { released: true };
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const close = () =>
  void app
    .close()
    .then(() => redis.quit())
    .then(() => process.exit(0));
process.on('SIGTERM', close);
process.on('SIGINT', close);
