/**
 * The lock record keeps an owner token of the service (22 base64url characters, newOwnerToken) as its
 * 16 raw bytes (scripts/_lock.lua). The lock scripts that take the caller's token get those bytes from
 * here as 32 hex digits: Node decodes in well under a microsecond what costs the script 22 character
 * steps each way in Lua, on every acquire and every release.
 *
 * Only a token that reads back exactly is decoded, the same rule as the script's ownerBytes: 22
 * characters of the base64url alphabet, the last one's 4 spare bits 0 (A, Q, g or w). Any other token
 * is kept as given ("" here), since Buffer's decoder would accept and lose what does not read back.
 */
const SERVICE_TOKEN = /^[A-Za-z0-9_-]{21}[AQgw]$/;

export function ownerTokenHex(ownerToken: string): string {
  return SERVICE_TOKEN.test(ownerToken) ? Buffer.from(ownerToken, 'base64url').toString('hex') : '';
}
