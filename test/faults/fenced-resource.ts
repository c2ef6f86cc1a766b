/**
 * The protected resource: one register per key that accepts a write only when its fencing token is at
 * least the highest it has seen (a holder may write several times under one token), as in the classic
 * fencing scheme. It counts what it accepted and rejected.
 */
export class FencedResource {
  private readonly highest = new Map<string, number>();
  private readonly values = new Map<string, string>();
  accepted = 0;
  rejected = 0;

  write(key: string, fencingToken: number, value: string): boolean {
    const highest = this.highest.get(key);
    if (highest !== undefined && fencingToken < highest) {
      this.rejected++;
      return false;
    }
    this.highest.set(key, fencingToken);
    this.values.set(key, value);
    this.accepted++;
    return true;
  }

  highestToken(key: string): number | undefined {
    return this.highest.get(key);
  }
}
