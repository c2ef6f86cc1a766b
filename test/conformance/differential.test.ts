import { describeLockDifferential } from './differential-locks.js';

/** Locks, lock sets and quota slots: the embedded store and Redis agree (differential-locks.ts). */
describeLockDifferential('redis', 200);
