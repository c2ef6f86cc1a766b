import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockStore } from '../helpers/store-words.js';
import type { PermitKind } from '../../src/domain/permit-values.js';
import type { PermitAcquireOutcome, PermitStore } from '../helpers/store-words.js';

/** Shared by the semaphore and read/write lock contracts: unique keys, acquire with its owner token, grants. */
export const uniqueKey = (name: string) => `${name}:${randomUUID()}`;

export type PermitResult = PermitAcquireOutcome & { ownerToken: string };
export type PermitGranted = Extract<PermitResult, { acquired: true }>;

export function permitsOf(store: LockStore): PermitStore {
  if (!store.permits) throw new Error(`the ${store.kind} store has no permits`);
  return store.permits;
}

export interface PermitCall {
  readonly weight: number;
  readonly capacity: number;
  readonly ttlMs?: number;
  readonly holder?: string | null;
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

export async function takePermit(store: LockStore, kind: PermitKind, key: string, call: PermitCall): Promise<PermitResult> {
  const ownerToken = newOwnerToken();
  const outcome = await permitsOf(store).acquirePermit({
    kind,
    id: key,
    ownerToken,
    ttlMs: call.ttlMs ?? 5_000,
    holder: call.holder ?? null,
    weight: call.weight,
    capacity: call.capacity,
    waitMs: call.waitMs ?? 0,
    signal: call.signal,
  });
  return { ...outcome, ownerToken };
}

/** Fails the test unless `r` is a grant, and narrows its type. */
export function granted(r: PermitResult): PermitGranted {
  expect(r.acquired, `expected a grant, got ${JSON.stringify(r)}`).toBe(true);
  if (!r.acquired) throw new Error('not granted');
  return r;
}
