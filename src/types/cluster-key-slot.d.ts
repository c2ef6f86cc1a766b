// cluster-key-slot (a dependency of ioredis) ships no types: its Redis Cluster hash slot of a key.
declare module 'cluster-key-slot' {
  /** The Cluster slot (0..16383) of a key: CRC16 of its hash tag, or of the whole key without one. */
  export default function calculateSlot(key: string | Buffer): number;
}
