import { type ReleaseRequest, withReleaseRequest } from '../../domain/permit-values.js';

/**
 * What a store's atomic step answers about one lease, in the shape the wait room and the stores'
 * renew paths share. Each store parses its own wire format (Lua replies, etcd transactions) into these.
 */

/** renew: the lease is still the caller's (with its token and new end, and a release request made of it), or it is gone. */
export type LeaseReply =
  | {
      held: true;
      fencingToken: number;
      expiresAtMs: number;
      releaseRequested?: ReleaseRequest;
      /** The lease's quota is counted through the quota-slot calls (see LockSetRenewOutcome.quotaOutside). */
      quotaOutside?: true;
    }
  | { held: false };

/** cancel: the waiter was granted meanwhile (it holds the lease now), or not, and how long the current lease has left. */
export type CancelReply = { held: true; fencingToken: number; expiresAtMs: number } | { held: false; retryAfterMs: number };

/** A renewal the store's atomic step confirmed, as a store's renew answers it (with the lease's release request, if any). */
export function renewedFrom(reply: Extract<LeaseReply, { held: true }>) {
  return withReleaseRequest(
    { renewed: true as const, fencingToken: reply.fencingToken, expiresAtMs: reply.expiresAtMs },
    reply.releaseRequested,
  );
}
