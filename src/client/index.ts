/**
 * keyholder's TypeScript client (`import { KeyholderClient } from 'keyholder/client'`). It runs on Node 20+
 * with the global fetch and imports nothing of the server: its types come from openapi.yaml.
 */
export {
  KeyholderClient,
  type AcquireOptions,
  type CampaignOptions,
  type ObserveOptions,
  type ForceRelease,
  type PermitForceRelease,
  type PermitPrimitive,
  type QueuedCaller,
  type KeyholderClientOptions,
  type LockGrant,
  type LockList,
  type LockRenewal,
  type LockStatus,
  type ReleaseRequestAnswer,
  type ReleaseRequested,
} from './client.js';
export {
  ForbiddenError,
  InvalidRequestError,
  InvalidResponseError,
  KeyholderError,
  LeaseLostError,
  LockHeldError,
  NotFoundError,
  HolderChangedError,
  NotOwnerError,
  QuotaExceededError,
  RateLimitedError,
  RedirectError,
  TlsError,
  TooManyWaitersError,
  UnauthenticatedError,
  UnavailableError,
  type ClientErrorCode,
  type Problem,
  type ProblemCode,
} from './errors.js';
export { Lease, type LeaseOptions } from './lease.js';
export type { RetryEvent } from './retry.js';
export type { components, paths } from './openapi-types.js';
