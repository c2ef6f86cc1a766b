import type { KeyholderClient } from '../lib/keyholder.js';

/**
 * How a follower learns that nobody leads. Followers only need "tell me when the lock is free"; the
 * implementation below polls GET /v1/locks/{key}. A watch (a stream of lock changes) would implement
 * the same interface by waiting for a "released" or "expired" event, and nothing else would change.
 */
export interface VacancyWatch {
  /** Resolves when the lock looks free (a hint: the caller still has to win the acquire). */
  untilVacant(key: string, signal?: AbortSignal): Promise<void>;
}

/** Polls inspect every `intervalMs`: a new leader within TTL + intervalMs of the old one stopping. */
export class PollingVacancyWatch implements VacancyWatch {
  constructor(
    private readonly client: KeyholderClient,
    private readonly intervalMs: number,
  ) {}

  async untilVacant(key: string, signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      const status = await this.client.inspect(key);
      // An unreachable service is not a vacancy: keep polling, never assume the lock is free.
      if (status.ok && !status.value.held) return;
      await new Promise((r) => setTimeout(r, this.intervalMs));
    }
  }
}
