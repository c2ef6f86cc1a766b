import { createHash } from 'node:crypto';

/**
 * What the store keeps for an acquire's Idempotency-Key: scoped to the caller (its API key id), so the
 * same key sent with another API key never matches, and hashed, so the store holds 22 characters
 * whatever the caller sent.
 */
export function idempotencyScope(callerId: string, idempotencyKey: string): string {
  return createHash('sha256').update(callerId).update('\0').update(idempotencyKey).digest('base64url').slice(0, 22);
}
