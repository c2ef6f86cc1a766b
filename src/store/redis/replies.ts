/**
 * Run-time checks of script replies. A reply of the wrong shape (a different script under the same
 * name, a proxy mangling data) must never be read as a grant, so anything unexpected throws.
 */
export class UnexpectedReplyError extends Error {
  override readonly name = 'UnexpectedReplyError';
  constructor(script: string, reply: unknown) {
    super(`unexpected reply from ${script}: ${JSON.stringify(reply)}`);
  }
}

/**
 * A reply that is not the answer to this call: the connection's replies are out of step with its
 * calls, so nothing more read from it can be trusted until it is replaced.
 */
export class MisalignedReplyError extends Error {
  override readonly name = 'MisalignedReplyError';
  constructor(script: string) {
    super(`reply to ${script} echoes another call's nonce: replies on this connection are out of step`);
  }
}

/** Checks a wrapped script reply {nonce, reply} (see withEcho) is the answer to this call, and unwraps it. */
export function unwrapEcho(script: string, reply: unknown, nonce: string): unknown {
  if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] !== 'string') {
    throw new MisalignedReplyError(script);
  }
  if (reply[0] !== nonce) throw new MisalignedReplyError(script);
  return reply[1];
}

function int(script: string, reply: unknown, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new UnexpectedReplyError(script, reply);
  return value;
}

export type AcquireReply =
  | { granted: true; fencingToken: number; expiresAtMs: number }
  | { granted: false; retryAfterMs: number };

export function parseAcquire(reply: unknown): AcquireReply {
  if (Array.isArray(reply)) {
    if (reply.length === 3 && reply[0] === 1) {
      return { granted: true, fencingToken: int('acquire', reply, reply[1]), expiresAtMs: int('acquire', reply, reply[2]) };
    }
    if (reply.length === 2 && reply[0] === 0) {
      return { granted: false, retryAfterMs: Math.max(1, int('acquire', reply, reply[1])) };
    }
  }
  throw new UnexpectedReplyError('acquire', reply);
}

export type RenewReply = { renewed: true; fencingToken: number; expiresAtMs: number } | { renewed: false };

export function parseRenew(reply: unknown): RenewReply {
  if (Array.isArray(reply)) {
    if (reply.length === 3 && reply[0] === 1) {
      return { renewed: true, fencingToken: int('renew', reply, reply[1]), expiresAtMs: int('renew', reply, reply[2]) };
    }
    if (reply.length === 1 && reply[0] === 0) return { renewed: false };
  }
  throw new UnexpectedReplyError('renew', reply);
}

export function parseRelease(reply: unknown): boolean {
  if (reply === 1 || reply === 0) return reply === 1;
  throw new UnexpectedReplyError('release', reply);
}

export type InspectReply =
  | { held: true; fencingToken: number; expiresAtMs: number; ttlRemainingMs: number; holder: string | null }
  | { held: false };

export function parseInspect(reply: unknown): InspectReply {
  if (Array.isArray(reply)) {
    if (reply.length === 5 && reply[0] === 1 && typeof reply[4] === 'string') {
      return {
        held: true,
        fencingToken: int('inspect', reply, reply[1]),
        expiresAtMs: int('inspect', reply, reply[2]),
        ttlRemainingMs: int('inspect', reply, reply[3]),
        holder: reply[4] === '' ? null : reply[4],
      };
    }
    if (reply.length === 1 && reply[0] === 0) return { held: false };
  }
  throw new UnexpectedReplyError('inspect', reply);
}
