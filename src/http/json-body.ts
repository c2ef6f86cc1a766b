import type { FastifyInstance } from 'fastify';
import { errorCodes } from 'fastify';
import secureJsonParse from 'secure-json-parse';

/** Refused as Fastify's own parser refuses them: they would reach Object.prototype once merged anywhere. */
const PARSE_OPTIONS = { protoAction: 'error', constructorAction: 'error' } as const;

/** A body that is valid JSON but holds a key that is refused. A 4xx whose message is the answer's detail. */
class ForbiddenKeyError extends Error {
  readonly statusCode = 400;
}

/**
 * Parses request bodies as Fastify's default JSON parser does (secure-json-parse, `__proto__` and
 * `constructor.prototype` keys refused), but keeps the reason when it refuses one: Fastify answers every
 * refusal "Body is not valid JSON", which sends a caller whose JSON is valid looking for a syntax error.
 * Malformed JSON keeps its SyntaxError (the error handler names it); a refused key says which. The body
 * is parsed once on the way in, as before; the second parse runs only for a refused body, to tell why.
 */
export function useJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
}

export function parseJsonBody(_request: unknown, body: string | Buffer, done: (error: Error | null, value?: unknown) => void): void {
  if (body.length === 0) {
    done(new errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY());
    return;
  }
  let value: unknown;
  try {
    value = secureJsonParse(body, PARSE_OPTIONS);
  } catch (error) {
    done(whyRefused(body, error));
    return;
  }
  done(null, value);
}

function whyRefused(body: string | Buffer, error: unknown): Error {
  const text = String(body);
  try {
    // secure-json-parse drops a leading byte-order mark; so does this check.
    JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (syntax) {
    return Object.assign(syntax as SyntaxError, { statusCode: 400 });
  }
  return error instanceof SyntaxError
    ? new ForbiddenKeyError('the body holds a "__proto__" or "constructor.prototype" key, which is refused: remove it')
    : Object.assign(new Error(String(error)), { statusCode: 400 });
}
