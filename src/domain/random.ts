import { randomBytes } from 'node:crypto';

/**
 * 4 KiB: random bytes are drawn from the OS CSPRNG this many at a time and handed out in slices, so a
 * 16-byte token costs a copy instead of a call into OpenSSL (the same trick Node's randomUUID uses).
 * Every byte is handed out once; the pool only ever holds bytes not yet used.
 */
const POOL_BYTES = 4096;

let pool = Buffer.alloc(0);
let offset = 0;

/** `bytes` bytes from the CSPRNG, base64url-encoded (no padding). */
export function randomBase64url(bytes: number): string {
  if (bytes > POOL_BYTES) return randomBytes(bytes).toString('base64url');
  if (offset + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const text = pool.toString('base64url', offset, offset + bytes);
  // Used bytes are wiped so the pool never keeps a copy of a token it already issued.
  pool.fill(0, offset, offset + bytes);
  offset += bytes;
  return text;
}
