import type { KeyholderClient } from '../lib/keyholder.js';

/**
 * How a follower learns that nobody leads. Followers only need "tell me when the lock is free".
 */
export interface VacancyWatch {
  /** Resolves when the lock looks free (a hint: the caller still has to win the acquire). */
  untilVacant(key: string, signal?: AbortSignal): Promise<void>;
}

/** A blocking query's longest wait; it is simply asked again after that. */
const WATCH_WAIT_MS = 30_000;
/** After a failed call (service unreachable, 503): wait this long before asking again. */
const RETRY_MS = 250;

/**
 * Blocking queries (`GET /v1/locks/{key}?index=N&waitMs=M`): the server answers the moment the lock
 * changes (release, expiry, force release, hand-over), so a new leader is elected within TTL + one round
 * trip of the old one stopping, and nothing polls. The index is compared for inequality only.
 */
export class BlockingVacancyWatch implements VacancyWatch {
  constructor(private readonly client: KeyholderClient) {}

  async untilVacant(key: string, signal?: AbortSignal): Promise<void> {
    let index = 0;
    for (;;) {
      signal?.throwIfAborted();
      const status = await this.client.watch(key, index, WATCH_WAIT_MS);
      if (!status.ok) {
        // An unreachable service is not a vacancy: ask again, never assume the lock is free.
        await new Promise((r) => setTimeout(r, RETRY_MS));
        continue;
      }
      if (!status.value.held) return;
      index = status.value.index;
    }
  }
}
