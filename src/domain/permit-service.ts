import type { PermitState } from './permit-values.js';
import type { PermitCore, PermitGrant, PermitRefusals, PermitRenewal } from './permits.js';

/** What an acquire of any multi-holder primitive carries besides its share of the key. */
export interface PermitAcquire {
  readonly ttlMs: number;
  readonly holder?: string | null;
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

/** One primitive's words over the permit core: how much of the key a request takes, and how its state reads. */
export interface PermitVocabulary<A extends PermitAcquire, V> {
  share(request: A): { readonly weight: number; readonly capacity: number };
  view(state: PermitState): V;
  /** Its refusals in its own words: the room is taken (`full`), or another capacity is live (`mismatch`). */
  readonly refusals: PermitRefusals;
}

/**
 * A multi-holder primitive (semaphore, read/write lock) as its callers see it: the permit core's rules
 * (see PermitCore) in the primitive's vocabulary.
 */
export class PermitService<A extends PermitAcquire, V> {
  constructor(
    private readonly core: PermitCore,
    private readonly vocabulary: PermitVocabulary<A, V>,
  ) {}

  acquire(namespace: string, key: string, request: A): Promise<PermitGrant> {
    const { weight, capacity } = this.vocabulary.share(request);
    return this.core.acquire(
      {
        namespace,
        key,
        ttlMs: request.ttlMs,
        holder: request.holder ?? null,
        weight,
        capacity,
        waitMs: request.waitMs ?? 0,
        signal: request.signal,
      },
      this.vocabulary.refusals,
    );
  }

  renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<PermitRenewal> {
    return this.core.renew(namespace, key, ownerToken, ttlMs);
  }

  release(namespace: string, key: string, ownerToken: string): Promise<void> {
    return this.core.release(namespace, key, ownerToken);
  }

  async inspect(namespace: string, key: string): Promise<V | null> {
    const state = await this.core.inspect(namespace, key);
    return state === null ? null : this.vocabulary.view(state);
  }
}
