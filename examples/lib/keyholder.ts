/**
 * A minimal keyholder client over fetch, the calls the examples need: acquire (with or without waiting),
 * renew, release, inspect. Errors come back as values, not exceptions: a lock held by someone else or
 * a lease that is gone is an everyday answer for a lock client.
 */

export interface Grant {
  readonly key: string;
  readonly ownerToken: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAt: string;
}

export interface LockStatus {
  readonly key: string;
  readonly held: boolean;
  readonly holder?: string | null;
  readonly fencingToken?: number;
  readonly ttlRemainingMs?: number;
  readonly waiters?: number;
  /** Watch index: changes on every grant, release, expiry, force release, hand-over. Compare for inequality. */
  readonly index: number;
}

export type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly status: number; readonly code: string };

export class KeyholderClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey?: string,
  ) {}

  acquire(key: string, body: { ttlMs: number; holder?: string; waitMs?: number }): Promise<Answer<Grant>> {
    const timeoutMs = (body.waitMs ?? 0) + 5_000;
    return this.call('POST', `/v1/locks/${encodeURIComponent(key)}/acquire`, body, timeoutMs);
  }

  renew(key: string, ownerToken: string, ttlMs: number): Promise<Answer<Omit<Grant, 'ownerToken'>>> {
    return this.call('POST', `/v1/locks/${encodeURIComponent(key)}/renew`, { ownerToken, ttlMs });
  }

  release(key: string, ownerToken: string): Promise<Answer<{ released: true }>> {
    return this.call('POST', `/v1/locks/${encodeURIComponent(key)}/release`, { ownerToken });
  }

  inspect(key: string): Promise<Answer<LockStatus>> {
    return this.call('GET', `/v1/locks/${encodeURIComponent(key)}`);
  }

  /**
   * A blocking query: the lock's state as soon as its index differs from `index` (at once if it already
   * does), or after `waitMs` unchanged.
   */
  watch(key: string, index: number, waitMs: number): Promise<Answer<LockStatus>> {
    return this.call('GET', `/v1/locks/${encodeURIComponent(key)}?index=${index}&waitMs=${waitMs}`, undefined, waitMs + 5_000);
  }

  private async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs = 5_000): Promise<Answer<T>> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.apiKey !== undefined) headers.authorization = `Bearer ${this.apiKey}`;
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch {
      // No answer: the lock service is unreachable or slow. Nothing may be assumed granted.
      return { ok: false, status: 0, code: 'unreachable' };
    }
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (res.ok) return { ok: true, value: json as T };
    return { ok: false, status: res.status, code: typeof json.code === 'string' ? json.code : `http_${res.status}` };
  }
}
