import { describeLockDifferential } from './differential-locks.js';

/** Locks, lock sets and quota slots: the embedded store and a 3-member etcd cluster agree (differential-locks.ts). */
describeLockDifferential('etcd', 200);
