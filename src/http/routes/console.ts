import { readFileSync } from 'node:fs';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

/**
 * The operator console at /console: a static page and its script and styles, read once at start-up.
 * The page holds no data and no secret, so it is public; everything it shows comes from the admin
 * API (scope `admin`, Bearer key the operator types in, kept in the tab's sessionStorage) and from
 * /metrics. No build step and no third-party code: three files, shipped next to this module.
 */
const asset = (name: string) => readFileSync(new URL(`../console/${name}`, import.meta.url), 'utf8');

/**
 * Only this origin's script and styles, no inline code, no framing: an injected lock key or holder
 * label could not run even if it were ever parsed as HTML (the script only sets textContent).
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const consoleRoutes: FastifyPluginAsync = async (app) => {
  const files = {
    '/console': { type: 'text/html; charset=utf-8', body: asset('console.html') },
    '/console/console.js': { type: 'text/javascript; charset=utf-8', body: asset('console.js') },
    '/console/console.css': { type: 'text/css; charset=utf-8', body: asset('console.css') },
  };
  const send = (reply: FastifyReply, file: { type: string; body: string }) =>
    reply
      .type(file.type)
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(file.body);
  // Public: the page, script and styles carry no data; what the page shows comes from the admin
  // routes, with the operator's key.
  const options = { schema: { hide: true }, logLevel: 'warn', config: { access: 'public' } } as const;
  for (const [url, file] of Object.entries(files)) {
    app.get(url, options, async (_request, reply) => send(reply, file));
  }
};
