import Fastify from 'fastify';

/**
 * The HTTP floor: the same Fastify version keyholder uses, one route that parses a small JSON body and
 * returns a small JSON body, no logging, no validation, no store. Whatever keyholder costs above this
 * is keyholder's own work.
 */
const app = Fastify({ logger: false });

app.get('/ready', async () => ({ ok: true }));
app.post('/echo', async (request) => {
  const body = request.body as { ttlMs?: unknown };
  return { key: 'echo', ttlMs: body.ttlMs, ok: true };
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const close = () => void app.close().then(() => process.exit(0));
process.on('SIGTERM', close);
process.on('SIGINT', close);
