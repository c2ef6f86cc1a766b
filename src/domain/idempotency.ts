import { createHash } from 'node:crypto';

/**
 * What the store keeps for an acquire's Idempotency-Key: `<scope>:<fingerprint>`.
 *
 * The scope is the caller (its API key id) and the key it sent, hashed, so the same key sent with
 * another API key never matches and the store holds 22 characters whatever the caller sent. The
 * fingerprint is a digest of the request fields that shape the grant (ttlMs, holder, lockDelayMs): a
 * retry with the same scope and fingerprint is answered with the live lease; the same scope with
 * another fingerprint is the key reused for a different request, which is refused (Stripe's rule),
 * never answered with a grant the caller did not ask for.
 */
export function idempotencyKeyOf(
  callerId: string,
  idempotencyKey: string,
  grant: { readonly ttlMs: number; readonly holder: string | null; readonly lockDelayMs: number },
): string {
  // JSON, so no field's text can run into the next; "" and null are both no holder, as in the stores.
  const fields = JSON.stringify([grant.ttlMs, grant.holder || null, grant.lockDelayMs]);
  return `${idempotencyScope(callerId, idempotencyKey)}:${createHash('sha256').update(fields).digest('base64url').slice(0, 16)}`;
}

/** The caller-and-key part of a stored idempotency key (base64url, so it holds no `:`). */
export function idempotencyScope(callerId: string, idempotencyKey: string): string {
  return createHash('sha256').update(callerId).update('\0').update(idempotencyKey).digest('base64url').slice(0, 22);
}

/**
 * How an acquire's idempotency key relates to the one a live lease was granted with: the same request
 * again (`replay`), the same key with another request (`reused`), or unrelated (`other`). A value
 * without a fingerprint is all scope. The Redis store makes the same comparison in Lua (acquire.lua).
 */
export function compareIdempotencyKeys(stored: string | null | undefined, asked: string): 'replay' | 'reused' | 'other' {
  if (stored === null || stored === undefined) return 'other';
  if (stored === asked) return 'replay';
  return scopeOf(stored) === scopeOf(asked) ? 'reused' : 'other';
}

function scopeOf(value: string): string {
  const colon = value.indexOf(':');
  return colon < 0 ? value : value.slice(0, colon);
}
