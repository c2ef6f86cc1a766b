import type { WatchSource } from '../../src/domain/watch.js';

/**
 * A source of a key's views that a test drives (ChangeWatch's blocking queries, test/domain/watch*.test.ts):
 * a key's view changes when the test says so, and a change notice reaches the watch only when the test
 * sends it; reads and subscriptions can be held or made to fail.
 */
export interface View {
  readonly index: number;
  /** When set, the view changes by itself this many ms after it was read. */
  readonly endsInMs?: number;
  readonly note?: string;
}

export class TestSource implements WatchSource<View> {
  views = new Map<string, View>();
  reads = 0;
  subscribes = 0;
  stops = 0;
  /** When set, the next reads fail with it. */
  readError: Error | undefined;
  /** When set, subscriptions wait for it (to hold a subscription in flight). */
  subscribeGate: Promise<void> | undefined;
  subscribeError: Error | undefined;
  /** When set, reads wait for it. */
  readGate: Promise<void> | undefined;
  private readonly listeners = new Map<string, Set<() => void>>();

  async watchChanges(id: string, onChange: () => void): Promise<() => void> {
    this.subscribes++;
    await this.subscribeGate;
    if (this.subscribeError) throw this.subscribeError;
    const set = this.listeners.get(id) ?? new Set();
    set.add(onChange);
    this.listeners.set(id, set);
    return () => {
      this.stops++;
      set.delete(onChange);
    };
  }

  async read(id: string): Promise<View> {
    this.reads++;
    await this.readGate;
    if (this.readError) throw this.readError;
    return this.views.get(id) ?? { index: 1 };
  }

  changesByItselfInMs(view: View): number | undefined {
    return view.endsInMs;
  }

  aged(view: View): View {
    return { ...view, note: 'aged' };
  }

  listening(id: string): number {
    return this.listeners.get(id)?.size ?? 0;
  }

  /** The view changes; `announce` sends the change notice (an expiry sends none). */
  set(id: string, view: View, announce = true): void {
    this.views.set(id, view);
    if (announce) for (const l of this.listeners.get(id) ?? []) l();
  }

  notify(id: string): void {
    for (const l of this.listeners.get(id) ?? []) l();
  }
}

export const settled = async <T>(p: Promise<T>) => {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  // A few turns of the event loop: enough for every promise chain the watch starts to run.
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  return done;
};
