/**
 * The Redis Cluster hash slot of a key, as cluster-key-slot (ioredis's) computes it, without the array
 * of the key's UTF-8 bytes that package builds first: the bytes are taken as they are encoded. Every
 * lock call asks for the slot of its name (KeySpace.shardOf), so the array was made twice per lock pair
 * (a few hundred bytes of garbage). Same rules to the bit, tested against cluster-key-slot on generated
 * keys: CRC16/XMODEM of the bytes, or of the bytes after the first `{` up to the next `}` when there are
 * any; a lone surrogate is encoded as three bytes, as that package does.
 */

/** CRC16/XMODEM (polynomial 0x1021, initial 0) of each byte value. */
const CRC16 = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

const OPEN = 0x7b;
const CLOSE = 0x7d;
const SLOT_MASK = 0x3fff;

/** The key's whole-key CRC, its tag's CRC, and where the tag stands, as the bytes go by. */
class SlotHash {
  whole = 0;
  tag = 0;
  /** The byte count just after the first `{`; -1 before it. */
  tagStart = -1;
  bytes = 0;
  /** The slot, once a tag has closed. */
  done = -1;

  add(byte: number): void {
    // The rest of a character whose byte closed the tag.
    if (this.done !== -1) return;
    this.bytes++;
    if (this.tagStart === -1) {
      if (byte === OPEN) this.tagStart = this.bytes;
    } else if (byte !== CLOSE) {
      this.tag = (CRC16[(byte ^ (this.tag >> 8)) & 0xff] as number) ^ ((this.tag << 8) & 0xffff);
    } else if (this.bytes - 1 !== this.tagStart) {
      this.done = this.tag & SLOT_MASK;
      return;
    }
    this.whole = (CRC16[(byte ^ (this.whole >> 8)) & 0xff] as number) ^ ((this.whole << 8) & 0xffff);
  }
}

/** One reused state: the slot is computed synchronously, start to end, with nothing in between. */
const state = new SlotHash();

/** The Redis Cluster hash slot (0 to 16383) of `key`. */
export function slotOf(key: string): number {
  const h = state;
  h.whole = 0;
  h.tag = 0;
  h.tagStart = -1;
  h.bytes = 0;
  h.done = -1;
  const length = key.length;
  for (let i = 0; i < length && h.done === -1; i++) {
    let char = key.charCodeAt(i);
    if (char < 0x80) {
      h.add(char);
    } else if (char < 0x800) {
      h.add((char >> 6) | 0xc0);
      h.add((char & 0x3f) | 0x80);
    } else if ((char & 0xfc00) === 0xd800 && i + 1 < length && (key.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      char = 0x10000 + ((char & 0x03ff) << 10) + (key.charCodeAt(++i) & 0x03ff);
      h.add((char >> 18) | 0xf0);
      h.add(((char >> 12) & 0x3f) | 0x80);
      h.add(((char >> 6) & 0x3f) | 0x80);
      h.add((char & 0x3f) | 0x80);
    } else {
      h.add((char >> 12) | 0xe0);
      h.add(((char >> 6) & 0x3f) | 0x80);
      h.add((char & 0x3f) | 0x80);
    }
  }
  return h.done !== -1 ? h.done : h.whole & SLOT_MASK;
}
